"""``python -m rlearn`` is the same as the ``rlearn`` command.

``python -m`` puts the working directory first on ``sys.path``, where a folder named ``rlearn`` or
``policies`` would shadow the installed packages: both are taken from this installation first
(:func:`use_installed_packages`); the working directory stays on ``sys.path`` for ``custom_imports``.
"""

import importlib.util
import os
import sys

#: the distribution's top-level packages, installed side by side
PACKAGES = ("rlearn", "policies")


def _found_in(name: str) -> str:
    """The directory the package ``name`` is (or would be) imported from; "" for none or a namespace."""
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None and spec.has_location else None
    return os.path.dirname(os.path.realpath(origin)) if origin else ""


def use_installed_packages(root: str = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) -> None:
    """Import ``rlearn`` and ``policies`` from ``root`` (where this installation keeps them) when the
    working directory would shadow them; do nothing (no import) when they resolve there already."""
    for name in PACKAGES:
        directory = os.path.join(root, name)
        init = os.path.join(directory, "__init__.py")
        if not os.path.isfile(init) or _found_in(name) == os.path.realpath(directory):
            continue
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[directory])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


if __name__ == "__main__":
    use_installed_packages()
    from rlearn.cli import main

    sys.exit(main())
