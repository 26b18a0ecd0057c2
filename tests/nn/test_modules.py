"""MLP, EnsembleMLP, EnsembleLinear and frozen: the same functions as plain torch modules."""

from __future__ import annotations

import pytest
import torch

from rlearn.nn import MLP, EnsembleLinear, EnsembleMLP, frozen


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


@pytest.mark.parametrize("activation", [None, "tanh"])
def test_mlp_is_its_sequential(activation):
    """MLP's forward and gradients are those of its nn.Sequential ``net``; state-dict keys are net's."""
    torch.manual_seed(0)
    net = MLP([3, 8, 16, 2], output_activation=activation)
    assert list(net.state_dict()) == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias",
                                      "net.4.weight", "net.4.bias"]
    assert isinstance(net.net[-1], torch.nn.Tanh) == (activation == "tanh")
    x = torch.randn(9, 3)
    out = net(x)
    out.square().sum().backward()
    ours = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    ref = net.net(x.clone())
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref)
    for a, p in zip(ours, net.parameters()):
        torch.testing.assert_close(a, p.grad)


def test_ensemble_mlp_members_and_shared_input():
    torch.manual_seed(0)
    ens = EnsembleMLP(3, [4, 8, 1])
    x = torch.randn(6, 4)
    out = ens(x)
    assert out.shape == (3, 6, 1)
    for i in range(3):
        h = torch.relu(x @ ens.layers[0].weight[i].t() + ens.layers[0].bias[i, :, 0])
        ref = h @ ens.layers[1].weight[i].t() + ens.layers[1].bias[i, :, 0]
        torch.testing.assert_close(out[i], ref)
        torch.testing.assert_close(ens(x, member=i), ref)
    own = torch.randn(3, 6, 4)  # one input per member
    torch.testing.assert_close(ens(own)[1], ens(own[1], member=1))
    with pytest.raises(ValueError, match="output_activation"):
        EnsembleMLP(2, [3, 1], output_activation="relu")
    with pytest.raises(ValueError, match="two sizes"):
        MLP([3])


def test_frozen_sends_gradients_to_the_input_only():
    torch.manual_seed(0)
    critic = EnsembleMLP(2, [3, 8, 1])
    critic.layers[0].bias.requires_grad_(False)  # a parameter frozen before stays frozen after
    x = torch.randn(5, 3, requires_grad=True)
    with frozen(critic):
        assert not any(p.requires_grad for p in critic.parameters())
        critic(x, member=0).mean().backward()
    assert x.grad is not None and all(p.grad is None for p in critic.parameters())
    assert [p.requires_grad for p in critic.parameters()] == [True, False, True, True]
    with pytest.raises(RuntimeError, match="inside"):
        with frozen(critic):
            raise RuntimeError("inside")
    assert [p.requires_grad for p in critic.parameters()] == [True, False, True, True]


# ------------------------------------------------------------------------- kept parameter list and views
def _reference(net: MLP, x: torch.Tensor) -> torch.Tensor:
    return net.net(x.clone())  # nn.Sequential over the same parameters


def test_kept_views_follow_in_place_updates_and_rebuild_when_parameters_change():
    """The parameter list and feature-major views a module keeps between calls: in-place updates (optimizer
    steps, load_state_dict) are seen; a replaced parameter, a dtype/device move and a deepcopy rebuild them."""
    torch.manual_seed(0)
    net = MLP([3, 8, 2], output_activation="tanh")
    x = torch.randn(5, 3)
    assert [a is b for a, b in zip(net.parameter_list(), net.parameters())] == [True] * 4
    kept = net.parameter_list()
    with torch.no_grad():
        net.net[0].weight.add_(0.5)  # in place: the views see it, nothing rebuilt
    torch.testing.assert_close(net(x), _reference(net, x))
    assert net.parameter_list() is kept
    other = MLP([3, 8, 2], output_activation="tanh")
    net.load_state_dict(other.state_dict())  # copies in place
    torch.testing.assert_close(net(x), _reference(other, x))
    net.load_state_dict(MLP([3, 8, 2], output_activation="tanh").state_dict(), assign=True)  # new Parameters
    assert net.parameter_list() is not kept and net.parameter_list()[0] is net.net[0].weight
    torch.testing.assert_close(net(x), _reference(net, x))
    net.net[2].bias = torch.nn.Parameter(torch.full((2,), 3.0))  # one parameter replaced by assignment
    torch.testing.assert_close(net(x), _reference(net, x))
    out = net(x)
    out.sum().backward()
    assert net.net[2].bias.grad is not None  # the gradient reaches the new parameter
    net.double()  # moved: .data replaced on the same Parameter objects
    torch.testing.assert_close(net(x.double()), _reference(net, x.double()))
    copy = __import__("copy").deepcopy(net)
    with torch.no_grad():
        copy.net[0].weight.zero_()
    assert not torch.equal(copy(x.double()), net(x.double()))  # the copy's views are its own
    torch.testing.assert_close(copy(x.double()), _reference(copy, x.double()))


def test_ensemble_member_views_without_gradients_and_with():
    """member=i through frozen (detached member views) and with gradients (graph through the selection)."""
    torch.manual_seed(0)
    ens = EnsembleMLP(2, [4, 6, 1])
    x = torch.randn(5, 4, requires_grad=True)
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
    actor, critics = MLP([3, 8, 2]), EnsembleMLP(2, [3, 8, 1])
    x = torch.randn(4, 3)
    with torch.inference_mode():
        actor(x), critics(x), critics(x, member=0)
    xg = x.clone().requires_grad_()
    loss = actor(x).sum() + critics(x).sum()
    with frozen(critics):
        loss = loss + critics(xg, member=0).sum()
    loss.backward()
    assert actor.net[0].weight.grad is not None and critics.layers[0].weight.grad is not None and xg.grad is not None


def test_q_ensemble_is_n_q_networks_of_the_concatenated_obs_and_action():
    from rlearn.nn import QEnsemble

    torch.manual_seed(0)
    q = QEnsemble(obs_dim=3, act_dim=2, hidden_sizes=[8, 8], n=2)
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    out = q(obs, action)
    assert out.shape == (2, 5)
    x = torch.cat([obs, action], dim=-1)
    for i in range(2):
        h = x
        for j, layer in enumerate(q.layers):
            h = h @ layer.weight[i].T + layer.bias[i].T
            h = h.relu() if j < len(q.layers) - 1 else h
        torch.testing.assert_close(out[i], h.squeeze(-1))
        torch.testing.assert_close(q(obs, action, member=i), h.squeeze(-1))
