"""The one MLP (single and stacked), EnsembleLinear, EnsembleLayerNorm, QEnsemble and frozen: the same functions
as plain torch modules with the same weights."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from rlearn.nn import MLP, EnsembleLinear, QEnsemble, frozen
from rlearn.nn import functional as nnf
from rlearn.nn import modules as nn_modules
from rlearn.nn.modules import FUSED_MIN_ROWS

_ACTIVATION_MODULES = {"relu": nn.ReLU, "tanh": nn.Tanh}


def build(*args, wide: bool = True, **kwargs) -> MLP:
    """An MLP that runs the feature-major kernels for FUSED_MIN_ROWS-row batches whatever its width (``wide``),
    or never (the plain path only)."""
    saved = nn_modules.FUSED_MIN_WIDTH
    nn_modules.FUSED_MIN_WIDTH = 1 if wide else 10**9
    try:
        return MLP(*args, **kwargs)
    finally:
        nn_modules.FUSED_MIN_WIDTH = saved


def test_the_fused_path_is_for_wide_relu_networks_and_large_batches(monkeypatch):
    calls = []
    apply = nnf.FeatureMajorMLP.apply
    monkeypatch.setattr(nnf.FeatureMajorMLP, "apply", lambda *args: calls.append(1) or apply(*args))
    wide, narrow = MLP([3, nn_modules.FUSED_MIN_WIDTH, 2]), MLP([3, nn_modules.FUSED_MIN_WIDTH - 1, 2])
    for net, rows, expected in ((wide, FUSED_MIN_ROWS, 1), (wide, FUSED_MIN_ROWS - 1, 0), (narrow, FUSED_MIN_ROWS, 0)):
        calls.clear()
        net(torch.randn(rows, 3)).sum().backward()
        assert len(calls) == expected, (net, rows)
    tanh = MLP([3, nn_modules.FUSED_MIN_WIDTH, 2], "tanh")
    calls.clear()
    tanh(torch.randn(FUSED_MIN_ROWS, 3)).sum().backward()
    assert not calls and not tanh.fusable


def sequential_of(net: MLP, member: int | None = None) -> nn.Sequential:
    """A plain ``nn.Sequential`` (``nn.Linear``, ``nn.LayerNorm``, ``nn.ReLU`` / ``nn.Tanh``) holding copies of
    ``net``'s weights (of stacked member ``member``)."""
    layers = []
    last = len(net.layers) - 1
    for i, layer in enumerate(net.layers):
        weight, bias = layer.weight.detach(), layer.bias.detach()
        if member is not None:
            weight, bias = weight[member], bias[member].reshape(-1)
        linear = nn.Linear(weight.shape[1], weight.shape[0]).to(weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(weight)
            linear.bias.copy_(bias)
        layers.append(linear)
        if i < last:
            if net.norms is not None:
                norm = nn.LayerNorm(weight.shape[0]).to(weight.dtype)
                w, b = net.norms[i].weight.detach(), net.norms[i].bias.detach()
                with torch.no_grad():
                    norm.weight.copy_(w if member is None else w[member].reshape(-1))
                    norm.bias.copy_(b if member is None else b[member].reshape(-1))
                layers.append(norm)
            layers.append(_ACTIVATION_MODULES[net.activation]())
        elif net.output_activation is not None:
            layers.append(_ACTIVATION_MODULES[net.output_activation]())
    return nn.Sequential(*layers)


def _sequential_grads(seq: nn.Sequential, net: MLP, member: int | None = None) -> list:
    """The reference's parameter gradients in ``net.parameter_list()`` order (linear layers, then norms)."""
    linears = [m for m in seq if isinstance(m, nn.Linear)]
    norms = [m for m in seq if isinstance(m, nn.LayerNorm)]
    grads = [g for m in linears for g in (m.weight.grad, m.bias.grad)]
    return grads + [g for m in norms for g in (m.weight.grad, m.bias.grad)]


def _own_grads(net: MLP, member: int | None = None) -> list:
    grads = []
    for p in net.parameter_list():
        g = p.grad
        if member is not None:
            g = g[member]
        grads.append(g)
    return grads


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 24), min_size=2, max_size=4),
    batch=st.sampled_from([1, 7, FUSED_MIN_ROWS]),
    activation=st.sampled_from(["relu", "tanh"]),
    output_activation=st.sampled_from([None, "relu", "tanh"]),
    layer_norm=st.booleans(),
    init=st.sampled_from(["default", "orthogonal"]),
    wide=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_mlp_is_the_plain_sequential_with_its_weights(sizes, batch, activation, output_activation, layer_norm, init,
                                                      wide, seed):
    """Outputs and every parameter's and the input's gradients equal those of nn.Sequential(Linear, [LayerNorm],
    activation, ..., Linear[, activation]) with the same weights, on every path (small batches: plain operations;
    FUSED_MIN_ROWS rows of a ReLU network: the feature-major Function)."""
    torch.manual_seed(seed)
    net = build(sizes, activation, output_activation, layer_norm=layer_norm, init=init, output_gain=0.5,
                wide=wide).double()
    if layer_norm:  # norms away from their ones/zeros start, so that their parameters matter
        with torch.no_grad():
            for p in net.norms.parameters():
                p.add_(torch.randn_like(p))
    ref = sequential_of(net)
    x = torch.randn(batch, sizes[0], dtype=torch.float64)
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    upstream = torch.randn(batch, sizes[-1], dtype=torch.float64)
    out, expected = net(x_ours), ref(x_ref)
    torch.testing.assert_close(out, expected)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad)
    for ours, theirs in zip(_own_grads(net), _sequential_grads(ref, net)):
        torch.testing.assert_close(ours, theirs)
    with torch.no_grad():
        torch.testing.assert_close(net(x), expected.detach())


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 3),
    sizes=st.lists(st.integers(1, 16), min_size=2, max_size=4),
    batch=st.sampled_from([3, FUSED_MIN_ROWS]),
    activation=st.sampled_from(["relu", "tanh"]),
    layer_norm=st.booleans(),
    shared_input=st.booleans(),
    wide=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_ensemble_members_are_plain_sequentials(n, sizes, batch, activation, layer_norm, shared_input, wide, seed):
    """An ensemble's member j (all at once, or alone with member=j) is the nn.Sequential of its own weights,
    gradients included."""
    torch.manual_seed(seed)
    net = build(sizes, activation, layer_norm=layer_norm, ensemble=n, wide=wide).double()
    if layer_norm:
        with torch.no_grad():
            for p in net.norms.parameters():
                p.add_(torch.randn_like(p))
    x = torch.randn(batch, sizes[0], dtype=torch.float64) if shared_input else \
        torch.randn(n, batch, sizes[0], dtype=torch.float64)
    out = net(x)
    assert out.shape == (n, batch, sizes[-1])
    out.square().sum().backward()
    for j in range(n):
        ref = sequential_of(net, member=j)
        xj = x if shared_input else x[j]
        expected = ref(xj)
        torch.testing.assert_close(out[j], expected)
        expected.square().sum().backward()
        for ours, theirs in zip(_own_grads(net, member=j), _sequential_grads(ref, net, member=j)):
            torch.testing.assert_close(ours.reshape(theirs.shape), theirs)
        torch.testing.assert_close(net(xj, member=j), expected)
        with torch.no_grad():
            torch.testing.assert_close(net(xj, member=j), expected)


def test_tanh_means_the_same_function_everywhere():
    """activation="tanh" is rlearn.nn.tanh (through sigmoid on large CPU tensors), equal to torch.tanh in value and
    gradient, saturation included; below the size limit it is torch.tanh itself."""
    for shape in [(8, 64), (256, 64)]:
        x = (torch.randn(*shape) * 5).requires_grad_()
        with torch.no_grad():
            x[0, :2] = torch.tensor([30.0, -30.0])
        ref_x = x.detach().clone().requires_grad_()
        y, ref = nnf.tanh(x), torch.tanh(ref_x)
        torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6)
        y.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, ref_x.grad, rtol=1e-5, atol=1e-6)
        assert (x.numel() >= nnf.SIGMOID_TANH_MIN_NUMEL) == (shape != (8, 64))
    small = torch.randn(4, 4)
    assert torch.equal(nnf.tanh(small), torch.tanh(small))


def test_orthogonal_init_draws_layer_by_layer_like_linear_then_orthogonal():
    """init="orthogonal" is nn.Linear followed at once by orthogonal_(weight, gain) and a zero bias, layer by layer
    (the random draws in that order), output layer with output_gain."""
    torch.manual_seed(3)
    net = MLP([4, 16, 8, 2], "tanh", init="orthogonal", gain=math.sqrt(2.0), output_gain=0.01)
    torch.manual_seed(3)
    expected = []
    for (a, b), gain in zip([(4, 16), (16, 8), (8, 2)], [math.sqrt(2.0), math.sqrt(2.0), 0.01]):
        layer = nn.Linear(a, b)
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
        expected.append(layer)
    for ours, theirs in zip(net.layers, expected):
        assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)
    w = net.layers[0].weight  # [16, 4]: orthonormal columns times the gain
    torch.testing.assert_close(w.T @ w, 2.0 * torch.eye(4), rtol=1e-5, atol=1e-5)
    stacked = MLP([4, 3, 2], init="orthogonal", ensemble=2, output_gain=1.0)
    for j in range(2):  # each member orthogonal on its own
        m = stacked.layers[0].weight[j]
        torch.testing.assert_close(m @ m.T, 2.0 * torch.eye(3), rtol=1e-5, atol=1e-5)  # [3, 4]: orthonormal rows
        assert torch.count_nonzero(stacked.layers[0].bias) == 0


def test_state_dict_keys_and_parameter_count():
    net = MLP([3, 8, 16, 2], layer_norm=True)
    assert list(net.state_dict()) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                      "layers.2.weight", "layers.2.bias", "norms.0.weight", "norms.0.bias",
                                      "norms.1.weight", "norms.1.bias"]
    for sizes, ensemble, layer_norm in [([3, 8, 16, 2], None, True), ([5, 7, 1], 2, False), ([4, 2], 3, True)]:
        built = MLP(sizes, layer_norm=layer_norm, ensemble=ensemble)
        assert MLP.parameter_count(sizes, ensemble, layer_norm) == sum(p.numel() for p in built.parameters())


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="two sizes"):
        MLP([3])
    with pytest.raises(ValueError, match="activation"):
        MLP([3, 4, 1], activation="gelu")
    with pytest.raises(ValueError, match="output_activation"):
        MLP([3, 4, 1], output_activation="sigmoid")
    with pytest.raises(ValueError, match="init"):
        MLP([3, 4, 1], init="xavier")
    with pytest.raises(ValueError, match="ensemble"):
        MLP([3, 4, 1], ensemble=0)
    with pytest.raises(ValueError, match="member"):
        MLP([3, 4, 1])(torch.randn(2, 3), member=0)
    with pytest.raises(ValueError, match="bf16 compute"):
        MLP([3, 4, 1], activation="tanh").set_compute_dtype("bf16")
    with pytest.raises(ValueError, match="bf16 compute"):
        MLP([3, 4, 1], layer_norm=True).set_compute_dtype("bf16")


@pytest.mark.parametrize("n_out", [1, 3])
def test_ensemble_linear_is_n_linear_layers(n_out):
    """EnsembleLinear (batch-major module API) equals n nn.Linear layers with its members' weights."""
    torch.manual_seed(0)
    layer = EnsembleLinear(2, 5, n_out)
    for x in (torch.randn(2, 7, 5), torch.randn(7, 5)):  # one input per member, or one shared
        out = layer(x)
        assert out.shape == (2, 7, n_out)
        for i in range(2):
            xi = x[i] if x.dim() == 3 else x
            torch.testing.assert_close(out[i], torch.nn.functional.linear(xi, layer.weight[i], layer.bias[i, :, 0]))


def test_frozen_sends_gradients_to_the_input_only():
    torch.manual_seed(0)
    critic = MLP([3, 8, 1], layer_norm=True, ensemble=2)
    critic.layers[0].bias.requires_grad_(False)  # a parameter frozen before stays frozen after
    flags = [p.requires_grad for p in critic.parameters()]
    x = torch.randn(5, 3, requires_grad=True)
    with frozen(critic):
        assert not any(p.requires_grad for p in critic.parameters())
        critic(x, member=0).mean().backward()
    assert x.grad is not None and all(p.grad is None for p in critic.parameters())
    assert [p.requires_grad for p in critic.parameters()] == flags and flags[1] is False
    with pytest.raises(RuntimeError, match="inside"):
        with frozen(critic):
            raise RuntimeError("inside")
    assert [p.requires_grad for p in critic.parameters()] == flags


# ------------------------------------------------------------------------- kept parameter list and views
@pytest.mark.parametrize("batch", [5, FUSED_MIN_ROWS])
def test_kept_views_follow_in_place_updates_and_rebuild_when_parameters_change(batch):
    """The parameter list and feature-major views a module keeps between calls: in-place updates (optimizer
    steps, load_state_dict) are seen; a replaced parameter, a dtype/device move and a deepcopy rebuild them."""
    torch.manual_seed(0)
    net = build([3, 8, 2], output_activation="tanh")
    x = torch.randn(batch, 3)

    def reference(module: MLP, inputs: torch.Tensor) -> torch.Tensor:
        return sequential_of(module)(inputs)

    assert [a is b for a, b in zip(net.parameter_list(), net.parameters())] == [True] * 4
    kept = net.parameter_list()
    with torch.no_grad():
        net.layers[0].weight.add_(0.5)  # in place: the views see it, nothing rebuilt
    torch.testing.assert_close(net(x), reference(net, x))
    assert net.parameter_list()[0] is kept[0]
    other = build([3, 8, 2], output_activation="tanh")
    net.load_state_dict(other.state_dict())  # copies in place
    torch.testing.assert_close(net(x), reference(other, x))
    net.load_state_dict(MLP([3, 8, 2], output_activation="tanh").state_dict(), assign=True)  # new Parameters
    assert net.parameter_list()[0] is not kept[0] and net.parameter_list()[0] is net.layers[0].weight
    torch.testing.assert_close(net(x), reference(net, x))
    net.layers[1].bias = torch.nn.Parameter(torch.full((2,), 3.0))  # one parameter replaced by assignment
    torch.testing.assert_close(net(x), reference(net, x))
    out = net(x)
    out.sum().backward()
    assert net.layers[1].bias.grad is not None  # the gradient reaches the new parameter
    net.double()  # moved: .data replaced on the same Parameter objects
    torch.testing.assert_close(net(x.double()), reference(net, x.double()))
    clone = copy.deepcopy(net)
    with torch.no_grad():
        clone.layers[0].weight.zero_()
    assert not torch.equal(clone(x.double()), net(x.double()))  # the copy's views are its own
    torch.testing.assert_close(clone(x.double()), reference(clone, x.double()))


def test_ensemble_member_views_without_gradients_and_with():
    """member=i through frozen (detached member views) and with gradients (graph through the selection)."""
    torch.manual_seed(0)
    ens = build([4, 6, 1], ensemble=2)
    x = torch.randn(FUSED_MIN_ROWS, 4, requires_grad=True)
    with frozen(ens):
        ens(x, member=1).sum().backward()
    with torch.no_grad():
        ens.layers[0].weight[1].mul_(2.0)  # in place after the member views were made
    ref = torch.relu(x @ ens.layers[0].weight[1].t() + ens.layers[0].bias[1, :, 0])
    ref = ref @ ens.layers[1].weight[1].t() + ens.layers[1].bias[1, :, 0]
    with torch.no_grad():
        torch.testing.assert_close(ens(x, member=1), ref)
    out = ens(x.detach(), member=1)
    out.sum().backward()
    assert ens.layers[0].weight.grad is not None and ens.layers[0].weight.grad[0].abs().sum() == 0
    assert ens.layers[0].weight.grad[1].abs().sum() > 0


def test_views_made_under_inference_mode_serve_later_training():
    """A module first called under inference_mode (acting) keeps views that a later training step can use."""
    torch.manual_seed(0)
    actor, critics = build([3, 8, 2]), build([3, 8, 1], ensemble=2)
    x = torch.randn(FUSED_MIN_ROWS, 3)
    with torch.inference_mode():
        actor(x), critics(x), critics(x, member=0)
    xg = x.clone().requires_grad_()
    loss = actor(x).sum() + critics(x).sum()
    with frozen(critics):
        loss = loss + critics(xg, member=0).sum()
    loss.backward()
    assert actor.layers[0].weight.grad is not None and critics.layers[0].weight.grad is not None
    assert xg.grad is not None


def test_q_ensemble_is_n_q_networks_of_the_concatenated_obs_and_action():
    torch.manual_seed(0)
    q = QEnsemble(obs_dim=3, act_dim=2, hidden_sizes=[8, 8], n=2)
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    out = q(obs, action)
    assert out.shape == (2, 5)
    x = torch.cat([obs, action], dim=-1)
    for i in range(2):
        expected = sequential_of(q, member=i)(x).squeeze(-1)
        torch.testing.assert_close(out[i], expected)
        torch.testing.assert_close(q(obs, action, member=i), expected)


@pytest.mark.parametrize("ensemble", [None, 2])
@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("batch", [8, FUSED_MIN_ROWS])
def test_gradients_have_the_parameters_own_strides(ensemble, layer_norm, batch):
    """Every parameter's gradient is laid out like the parameter itself, size-1 dimensions included: DDP copies
    gradients into buckets of the parameters' layout and warns (a slower copy) otherwise."""
    torch.manual_seed(0)
    for wide in (True, False):
        net = build([3, 16, 16, 1], layer_norm=layer_norm, ensemble=ensemble, wide=wide)
        net(torch.randn(batch, 3)).square().sum().backward()
        for name, p in net.named_parameters():
            assert p.grad.stride() == p.stride(), (name, p.grad.stride(), p.stride())
