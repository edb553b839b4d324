"""Knowledge editors as ModelEdits: ROME, AlphaEdit and constrained fine-tuning (FT-L).

ROME (Meng et al. 2022, as EasyEdit runs it): the key ``k*`` is the input of ``mlp.down_proj`` at the
subject's last token, averaged over the prompts; ``v* = W k* + delta`` where ``delta`` (added to the MLP
output at the key token of every prompt) is optimised by Adam to minimise the target's NLL + ``kl_factor``
KL to the unedited next-token distribution on the KL prompts + ``weight_decay * |delta| / |W k*|^2``, with
``|delta| <= clamp_norm * |W k*|`` and an early stop at NLL < ``early_stop``; then the rank-one update
``W' = W + (v* - W k*) u^T / (u^T k*)`` with ``u = C^-1 k*`` (``C`` the key second moment) or ``u = k*``
(``mom2_adjustment`` off, EasyEdit's Llama default), so ``W' k* = v*`` exactly.

AlphaEdit (Fang et al. 2025): the same ``v*``; the update is projected onto the null space of the preserved
keys' second moment (``P = U_0 U_0^T`` over eigenvalues below ``nullspace_threshold`` times the largest), so
``W' k = W k`` for every preserved key; ``Delta^T = (P k* k*^T + l2 |P k*|^2 I)^-1 P k* r^T`` (EasyEdit's
solve for one edit at one layer, ``l2`` relative to ``|P k*|^2``).

The δ optimisation runs either the full model per step (``replay="full"``) or, since layers below the edit
are unchanged, the cached residual stream entering the edited block (``replay="prefix"``,
:class:`trustlab.llm.PrefixCache`); both give the same loss.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConvergenceWarning, InputError, TrustlabError
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.core.threads import limit_threads
from trustlab.methods.shattering._paper import PAPER
from trustlab.methods.shattering._requests import EditRequest, KeyStats, down_proj, padded

__all__ = ["ROME", "AlphaEdit", "EditorInfo", "FineTuneEdit", "SingularCovarianceWarning"]


class SingularCovarianceWarning(UserWarning):
    """The key covariance was singular or ill-conditioned and was regularised with a ridge."""


@dataclass
class EditorInfo(EditInfo):
    """``handle.info`` of a knowledge edit: site, optimisation trace and what the update did.

    ``k_star``/``v_star`` (numpy) are the key and target value, ``delta_w`` the weight update (d_model x d_mlp;
    rank one for ROME), so an edit can be saved and re-applied as ``W += delta_w``.
    """

    layer: int = -1
    loss_trace: list[float] = field(default_factory=list)
    converged: bool = False
    target_prob: float = float("nan")
    delta_norm: float = 0.0
    update_norm: float = 0.0
    condition: float = float("nan")
    ridge: float = 0.0
    n_null: int = -1
    k_star: Any = None
    v_star: Any = None
    delta_w: Any = None


class _Forward:
    """Next-token logits at each prompt's last token with ``delta`` added at its key token (block ``layer``)."""

    def __init__(self, model: Any, layer: int, seqs: list[list[int]], key_pos: list[int], replay: str) -> None:
        import torch

        self.model, self.layer, self.replay = model, layer, replay
        self.mod = down_proj(model, layer)
        self.ids, self.mask, self.pos = padded(seqs)
        width = self.ids.shape[1]
        self.key_idx = torch.tensor([width - len(s) + (k % len(s)) for s, k in zip(seqs, key_pos, strict=True)])
        self.rows = torch.arange(len(seqs))
        self.delta: Any = None
        self.cache = None
        if replay == "prefix":
            from trustlab.llm import PrefixCache
            from trustlab.llm.sites import dims

            self.cache = PrefixCache.from_states(model, dims(model).n_layers - layer, self._states(), self.ids,
                                                 self.mask)

    def _states(self) -> Any:
        import torch

        from trustlab.llm import trace

        site = f"blocks.{self.layer}.resid_pre"
        with torch.no_grad(), trace(self.model, [site], stop_after="auto") as tr:
            tr.run(self.ids, attention_mask=self.mask, position_ids=self.pos, use_cache=False)
        return tr[site]

    def _hook(self, module: Any, args: Any, out: Any) -> Any:
        if self.delta is None:
            return out
        out = out.clone()
        out[self.rows, self.key_idx] = out[self.rows, self.key_idx] + self.delta
        return out

    def logits(self) -> Any:
        h = self.mod.register_forward_hook(self._hook)
        try:
            if self.cache is not None:
                return self.cache.forward(positions="last")
            return self.model(input_ids=self.ids, attention_mask=self.mask, position_ids=self.pos).logits[:, -1]
        finally:
            h.remove()

    def keys_and_outputs(self) -> tuple[Any, Any]:
        """Inputs and outputs of the down-projection at the key tokens (no delta)."""
        import torch

        store: dict[str, Any] = {}
        h = self.mod.register_forward_hook(lambda m, a, o: store.update(k=a[0].detach(), v=o.detach()))
        try:
            with torch.no_grad():
                self.model(input_ids=self.ids, attention_mask=self.mask, position_ids=self.pos)
        finally:
            h.remove()
        return store["k"][self.rows, self.key_idx], store["v"][self.rows, self.key_idx]


_EDITOR_RULES: dict[str, list[Any]] = {
    "layer": [Interval(int, 0, None)],
    "v_lr": [Interval(float, 0, None, closed="neither")],
    "v_steps": [Interval(int, 1, None)],
    "kl_factor": [Interval(float, 0, None)],
    "weight_decay": [Interval(float, 0, None)],
    "clamp_norm": [Interval(float, 0, None, closed="neither")],
    "early_stop": [Interval(float, 0, None)],
    "replay": [Options(["prefix", "full"])],
}


class _RankOneEditor(ModelEdit):
    """Shared ROME/AlphaEdit machinery: the key ``k*``, the ``v*`` optimisation and the update."""

    paper = PAPER
    _info_class = EditorInfo
    _constraints: ClassVar[dict[str, list[Any]]] = dict(_EDITOR_RULES)

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        import torch

        from trustlab.methods.shattering._kg import CyclicKG
        from trustlab.methods.shattering._model import make_kg_model
        from trustlab.methods.shattering._requests import key_covariance, kg_request

        kg = CyclicKG(16)

        def model() -> Any:
            return make_kg_model(kg, d_model=16, n_heads=2, n_layers=2)

        req = kg_request(kg, 0, 0, kg.shifted(0, kg.answer(0, 0), 2), n_contexts=2, context_hops=1)
        stats = key_covariance(model(), 1, kg.walks(64, 9, random_state=0)[0])
        return {"model": model, "args": (req,), "kwargs": {"stats": stats},
                "forward_input": {"input_ids": torch.tensor([[0, 16, 3, 18]])}}

    def _prepare(self, model: Any, request: EditRequest) -> tuple[Any, Any, Any, Any]:
        import torch

        if not isinstance(request, EditRequest):
            raise InputError(f"The 'request' argument of {type(self).__name__}.apply must be an EditRequest. "
                             f"Got {type(request).__name__} instead.")
        vocab = int(model.get_output_embeddings().weight.shape[0])
        request.check(vocab, f"{type(self).__name__}.apply")
        fwd = _Forward(model, self.layer, request.prompts, request.key_positions, self.replay)
        keys, outs = fwd.keys_and_outputs()
        k_star, v_init = keys.mean(0), outs.mean(0)
        kl_fwd = None
        if request.kl_prompts:
            kl_fwd = _Forward(model, self.layer, request.kl_prompts, request.kl_positions, self.replay)
            with torch.no_grad():
                kl_fwd.p0 = torch.log_softmax(kl_fwd.logits(), -1)
        return fwd, kl_fwd, k_star, v_init

    def _optimise_v(self, fwd: _Forward, kl_fwd: Any, v_init: Any, target: int, info: EditorInfo) -> Any:
        """Optimise ``delta``; returns ``v* = v_init + delta`` (detached)."""
        import torch

        delta = torch.zeros_like(v_init, requires_grad=True)
        opt = torch.optim.Adam([delta], lr=self.v_lr)
        max_norm = self.clamp_norm * float(v_init.norm())
        for _ in range(self.v_steps):
            fwd.delta = delta
            nll = -torch.log_softmax(fwd.logits(), -1)[:, target].mean()
            info.loss_trace.append(float(nll.detach()))
            if info.loss_trace[-1] < self.early_stop:
                break
            loss = nll + self.weight_decay * delta.norm() / v_init.norm().clamp_min(1e-12) ** 2
            if kl_fwd is not None and self.kl_factor > 0:
                kl_fwd.delta = delta
                logp = torch.log_softmax(kl_fwd.logits(), -1)
                loss = loss + self.kl_factor * torch.nn.functional.kl_div(logp, kl_fwd.p0, log_target=True,
                                                                          reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                if delta.norm() > max_norm:
                    delta.mul_(max_norm / delta.norm())
        fwd.delta = None
        if kl_fwd is not None:
            kl_fwd.delta = None
        info.delta_norm = float(delta.detach().norm())
        return (v_init + delta).detach()

    def _apply(self, model: Any, handle: EditHandle, request: EditRequest, stats: KeyStats | None = None) -> None:
        import torch

        info: EditorInfo = handle.info  # type: ignore[assignment]
        info.layer = int(self.layer)
        with limit_threads(None), torch.enable_grad():
            params = list(model.parameters())
            grads = [p.requires_grad for p in params]
            for p in params:
                p.requires_grad_(False)
            try:
                fwd, kl_fwd, k_star, v_init = self._prepare(model, request)
                v_star = self._optimise_v(fwd, kl_fwd, v_init, int(request.target), info)
                W = fwd.mod.weight
                delta_w = self._update(W.detach(), k_star.detach(), v_star, stats, info)
                if not torch.isfinite(delta_w).all():
                    raise TrustlabError(f"{type(self).__name__} produced a non-finite weight update; the model "
                                        "was restored.")
                with torch.no_grad():
                    W.add_(delta_w.to(W.dtype))
                info.update_norm = float(delta_w.norm())
                info.k_star, info.v_star = k_star.double().numpy(), v_star.double().numpy()
                info.delta_w = delta_w.numpy()
            finally:
                for p, g in zip(params, grads, strict=True):
                    p.requires_grad_(g)
        with torch.no_grad():
            p = torch.softmax(_Forward(model, self.layer, request.prompts, request.key_positions, "full").logits(), -1)
        info.target_prob = float(p[:, int(request.target)].mean())
        info.converged = bool((p.argmax(-1) == int(request.target)).float().mean() >= 0.5)
        if not info.converged:
            warnings.warn(f"{type(self).__name__}: the edit did not make the target the top prediction on most "
                          f"prompts (mean target probability {info.target_prob:.3f}).", ConvergenceWarning,
                          stacklevel=4)

    def _update(self, W: Any, k: Any, v: Any, stats: KeyStats | None, info: EditorInfo) -> Any:
        raise NotImplementedError  # pragma: no cover - abstract


def _check_stats(stats: Any, layer: int, d: int, owner: str) -> np.ndarray:
    if not isinstance(stats, KeyStats):
        raise InputError(f"The 'stats' argument of {owner}.apply must be KeyStats (from key_covariance). "
                         f"Got {type(stats).__name__} instead.")
    if stats.layer != layer or stats.mom2.shape != (d, d):
        raise InputError(f"The 'stats' argument of {owner}.apply was computed at layer {stats.layer} with shape "
                         f"{stats.mom2.shape}; this editor edits layer {layer} (keys of size {d}).")
    return stats.mom2


class ROME(_RankOneEditor):
    """Rank-One Model Editing of ``model.layers[layer].mlp.down_proj`` (EasyEdit's algorithm, CPU, fp32).

    Parameters
    ----------
    layer : int, default=1
    mom2_adjustment : bool, default=True
        Use ``u = C^-1 k*`` with the key second moment ``C`` passed as ``stats`` to :meth:`apply`; False
        uses ``u = k*`` (no statistics needed).
    ridge : float, default=0.0
        Added as ``ridge * tr(C) / d`` to ``C``; a singular or ill-conditioned ``C`` (condition > 1e8) gets
        at least 1e-4 with a :class:`SingularCovarianceWarning`.
    v_lr, v_steps, kl_factor, weight_decay, clamp_norm, early_stop : v* optimisation (EasyEdit: 0.5, 25,
        0.0625, 1e-3, 4, 0.05)
    replay : {"prefix", "full"}, default="prefix"

    Example
    -------
    >>> from trustlab.methods.shattering import CyclicKG, make_kg_model, kg_request
    >>> kg = CyclicKG(16); model = make_kg_model(kg, d_model=16, n_heads=2)
    >>> req = kg_request(kg, 0, 0, kg.shifted(0, kg.answer(0, 0), 2))
    >>> with ROME(layer=1, mom2_adjustment=False).apply(model, req) as h:
    ...     h.info.layer
    1
    """

    _constraints: ClassVar[dict[str, list[Any]]] = dict(
        _EDITOR_RULES, mom2_adjustment=[bool], ridge=[Interval(float, 0, None)])

    def __init__(self, *, layer: int = 1, mom2_adjustment: bool = True, ridge: float = 0.0, v_lr: float = 0.5,
                 v_steps: int = 25, kl_factor: float = 0.0625, weight_decay: float = 1e-3, clamp_norm: float = 4.0,
                 early_stop: float = 0.05, replay: str = "prefix") -> None:
        self.layer = layer
        self.mom2_adjustment = mom2_adjustment
        self.ridge = ridge
        self.v_lr = v_lr
        self.v_steps = v_steps
        self.kl_factor = kl_factor
        self.weight_decay = weight_decay
        self.clamp_norm = clamp_norm
        self.early_stop = early_stop
        self.replay = replay

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"v_steps": 3}, {"v_steps": 2, "mom2_adjustment": False, "replay": "full"}]

    def _update(self, W: Any, k: Any, v: Any, stats: KeyStats | None, info: EditorInfo) -> Any:
        import torch

        if self.mom2_adjustment:
            if stats is None:
                raise InputError("ROME(mom2_adjustment=True).apply needs stats=key_covariance(model, layer, inputs) "
                                 "(or use mom2_adjustment=False).")
            C = _check_stats(stats, self.layer, W.shape[1], "ROME").astype(np.float64)
            d = C.shape[0]
            ev = np.linalg.eigvalsh(C)
            info.condition = float(ev[-1] / ev[0]) if ev[0] > 0 else float("inf")
            ridge = float(self.ridge)
            if not np.isfinite(info.condition) or info.condition > 1e8:
                ridge = max(ridge, 1e-4)
                warnings.warn(f"ROME: the key covariance at layer {self.layer} is singular or ill-conditioned "
                              f"(condition {info.condition:.3g}, {stats.n_samples} samples for {d} dimensions); "
                              f"regularised with ridge {ridge:g} * tr(C)/d.", SingularCovarianceWarning, stacklevel=5)
            info.ridge = ridge
            C = C + ridge * np.trace(C) / d * np.eye(d)
            u = torch.as_tensor(np.linalg.solve(C, k.double().numpy()), dtype=torch.float64)
        else:
            u = k.double()
        k64 = k.double()
        denom = float(u @ k64)
        if abs(denom) <= 1e-12 * float(u.norm() * k64.norm()) or not np.isfinite(denom):
            raise TrustlabError(f"ROME: u^T k* = {denom:.3g} is ~0; the rank-one update would blow up.")
        resid = v.double() - W.double() @ k64
        return torch.outer(resid, u) / denom


class AlphaEdit(_RankOneEditor):
    """AlphaEdit: ROME's ``v*`` with the update projected onto the null space of the preserved keys.

    Parameters
    ----------
    layer : int, default=1
    nullspace_threshold : float, default=2e-2
        Eigenvalues of the preserved-key second moment below this fraction of the largest span the null space.
    l2 : float, default=1e-2
        Ridge of the solve, relative to ``|P k*|^2`` (the edit reaches ``1 / (1 + l2)`` of the residual).
    v_lr, v_steps, kl_factor, weight_decay, clamp_norm, early_stop, replay : as :class:`ROME`
    """

    _constraints: ClassVar[dict[str, list[Any]]] = dict(
        _EDITOR_RULES, nullspace_threshold=[Interval(float, 0, 1, closed="neither")], l2=[Interval(float, 0, None)])

    def __init__(self, *, layer: int = 1, nullspace_threshold: float = 2e-2, l2: float = 1e-2, v_lr: float = 0.5,
                 v_steps: int = 25, kl_factor: float = 0.0625, weight_decay: float = 1e-3, clamp_norm: float = 4.0,
                 early_stop: float = 0.05, replay: str = "prefix") -> None:
        self.layer = layer
        self.nullspace_threshold = nullspace_threshold
        self.l2 = l2
        self.v_lr = v_lr
        self.v_steps = v_steps
        self.kl_factor = kl_factor
        self.weight_decay = weight_decay
        self.clamp_norm = clamp_norm
        self.early_stop = early_stop
        self.replay = replay

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"v_steps": 3}]

    def _update(self, W: Any, k: Any, v: Any, stats: KeyStats | None, info: EditorInfo) -> Any:
        import torch

        if stats is None:
            raise InputError("AlphaEdit.apply needs stats=key_covariance(model, layer, preserved_inputs).")
        C = _check_stats(stats, self.layer, W.shape[1], "AlphaEdit").astype(np.float64)
        ev, U = np.linalg.eigh(C)
        null = ev < self.nullspace_threshold * ev[-1]
        info.n_null = int(null.sum())
        P = torch.as_tensor(U[:, null] @ U[:, null].T)
        k64 = k.double()
        pk = P @ k64
        scale = float(pk @ k64)
        if scale <= 1e-12 * float(k64 @ k64):
            raise TrustlabError("AlphaEdit: the key lies in the span of the preserved keys (P k* ~ 0); no update "
                                "can change it without changing them. Lower nullspace_threshold.")
        resid = v.double() - W.double() @ k64
        A = P @ torch.outer(k64, k64) + self.l2 * scale * torch.eye(len(k64), dtype=torch.float64)
        X = torch.linalg.solve(A, torch.outer(pk, resid))
        return X.T


class FineTuneEdit(ModelEdit):
    """Constrained fine-tuning of the same down-projection (FT-L baseline): Adam on the target NLL, each
    weight kept within ``norm_constraint`` of its original value (EasyEdit's FT-L clamp).

    Parameters
    ----------
    layer : int, default=1
    lr : float, default=5e-3
    steps : int, default=25
    norm_constraint : float, default=5e-2
    """

    paper = PAPER
    _info_class = EditorInfo
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "layer": [Interval(int, 0, None)], "lr": [Interval(float, 0, None, closed="neither")],
        "steps": [Interval(int, 1, None)], "norm_constraint": [Interval(float, 0, None, closed="neither")]}

    def __init__(self, *, layer: int = 1, lr: float = 5e-3, steps: int = 25, norm_constraint: float = 5e-2) -> None:
        self.layer = layer
        self.lr = lr
        self.steps = steps
        self.norm_constraint = norm_constraint

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"steps": 2}]

    _get_test_inputs = _RankOneEditor._get_test_inputs

    def _apply(self, model: Any, handle: EditHandle, request: EditRequest, stats: Any = None) -> None:
        import torch

        if not isinstance(request, EditRequest):
            raise InputError(f"The 'request' argument of FineTuneEdit.apply must be an EditRequest. "
                             f"Got {type(request).__name__} instead.")
        request.check(int(model.get_output_embeddings().weight.shape[0]), "FineTuneEdit.apply")
        info: EditorInfo = handle.info  # type: ignore[assignment]
        info.layer = int(self.layer)
        fwd = _Forward(model, self.layer, request.prompts, request.key_positions, "full")
        W = fwd.mod.weight
        W0 = W.detach().clone()
        params = list(model.parameters())
        grads = [p.requires_grad for p in params]
        with limit_threads(None), torch.enable_grad():
            for p in params:
                p.requires_grad_(p is W)
            try:
                opt = torch.optim.Adam([W], lr=self.lr)
                for _ in range(self.steps):
                    nll = -torch.log_softmax(fwd.logits(), -1)[:, int(request.target)].mean()
                    info.loss_trace.append(float(nll.detach()))
                    opt.zero_grad()
                    nll.backward()
                    opt.step()
                    with torch.no_grad():
                        W.copy_(W0 + (W - W0).clamp(-self.norm_constraint, self.norm_constraint))
            finally:
                for p, g in zip(params, grads, strict=True):
                    p.requires_grad_(g)
        with torch.no_grad():
            p = torch.softmax(fwd.logits(), -1)
        info.update_norm = float((W.detach() - W0).norm())
        info.target_prob = float(p[:, int(request.target)].mean())
        info.converged = bool((p.argmax(-1) == int(request.target)).float().mean() >= 0.5)
