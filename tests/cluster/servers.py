"""Real servers for the cluster tests, started on 127.0.0.1 in a temporary folder and stopped afterwards:
a one-node Slurm (munged, slurmctld, slurmd; Debian's ``slurm-wlm`` and ``munge``) and a PostgreSQL
(Debian's ``postgresql``). Each says in one line why it cannot start where the programs are missing."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

__all__ = ["LocalSlurm", "LocalPostgres", "free_port", "slurm_missing", "postgres_missing"]

SLURM_PROGRAMS = ("sbatch", "slurmctld", "slurmd", "munged", "scontrol", "squeue")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _find(name: str) -> Optional[str]:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def slurm_missing() -> Optional[str]:
    """Why a local Slurm cannot start here (None when it can)."""
    missing = [name for name in SLURM_PROGRAMS if _find(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing; apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the local Slurm runs its daemons as root (SlurmUser=root)"
    return None


def _wait(check, timeout: float, what: str, logs: List[Path]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}\n{log.read_text(errors='replace')[-2000:]}" for log in logs if log.is_file())
            raise RuntimeError(f"{what} did not come up in {timeout:.0f} s\n{tails}")
        time.sleep(0.2)


class LocalSlurm:
    """munged + slurmctld + slurmd for one node ``localhost`` with ``cpus`` CPUs, configured in ``root``;
    :attr:`env` points ``sbatch``, ``squeue``, ``scontrol`` and submitit at it (``SLURM_CONF``)."""

    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.root = Path(root)
        self.cpus = cpus
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "munge" / "munge.socket"
        self.env: Dict[str, str] = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._processes: List[subprocess.Popen] = []

    def start(self) -> "LocalSlurm":
        munge = self.root / "munge"
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(munge, 0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn([_find("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={self.socket}",
                     f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                     f"--seed-file={munge / 'munged.seed'}"], munge / "munged.out")
        _wait(self.socket.exists, 20, "munged", [munge / "munged.log", munge / "munged.out"])
        ctld, slurmd = free_port(), free_port()
        memory = max(1024, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 ** 20 // 2)
        self.conf.write_text(f"""\
ClusterName=rlearn-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}
SlurmdLogFile={self.root / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerParameters=defer_batch
KillWait=20
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""")
        self._spawn([_find("slurmctld"), "-D", "-i", "-f", str(self.conf)], self.root / "log" / "slurmctld.out")
        self._spawn([_find("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)], self.root / "log" / "slurmd.out")
        logs = [self.root / "log" / n for n in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out")]
        _wait(self._node_idle, 60, "slurmctld + slurmd", logs)
        return self

    def _spawn(self, argv: List[str], out: Path) -> None:
        with open(out, "ab") as handle:
            self._processes.append(subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=self.env,
                                                    start_new_session=True))

    def _node_idle(self) -> bool:
        done = subprocess.run([_find("sinfo"), "-h", "-o", "%T", "-n", "localhost"], capture_output=True, text=True,
                              env=self.env)
        return done.returncode == 0 and done.stdout.strip() in ("idle", "mixed", "allocated")

    def command(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command (``scontrol``, ``squeue``, ``scancel``, ...) against this Slurm."""
        done = subprocess.run([_find(argv[0]), *argv[1:]], capture_output=True, text=True, env=self.env, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done

    def stop(self) -> None:
        """Cancel every job, stop the daemons (slurmd first) and wait for them."""
        try:
            self.command("scancel", "--full", "--user=root", check=False)
        except Exception:  # noqa: BLE001 - stopping anyway
            pass
        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        self._processes = []


def postgres_missing() -> Optional[str]:
    """Why a local PostgreSQL cannot start here (None when it can)."""
    found = _postgres_bin()
    if found is None:
        return "PostgreSQL is not installed (initdb, pg_ctl missing; apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401  (SQLAlchemy 2.1's driver for postgresql://)
    except ImportError:
        return "psycopg is not installed (pip install 'rlearn[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PostgreSQL refuses to run as root and there is no 'postgres' user"
    return None


def _postgres_bin() -> Optional[Path]:
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


class LocalPostgres:
    """A PostgreSQL cluster in ``root``, listening on 127.0.0.1 only, with a database ``optuna`` reachable
    at :attr:`url` (trust authentication, loopback only)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/optuna"
        self._bin = _postgres_bin()

    def _as_owner(self, argv: List[str]) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:  # PostgreSQL refuses root: run its programs as the postgres user
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    def start(self) -> "LocalPostgres":
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chmod(self.root, 0o755)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        for argv in ([str(self._bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                     [str(self._bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "postgres.log"), "-w",
                      "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root}", "start"],
                     [str(self._bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "optuna"]):
            done = self._as_owner(argv)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)}: {done.stdout}{done.stderr}")
        return self

    def stop(self) -> None:
        self._as_owner([str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])
