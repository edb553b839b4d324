"""LoReFT and D-ReFT as ModelEdits: trainable interventions on one block's residual stream output.

``apply(model)`` hooks block ``layer``'s output (``blocks.{layer}.resid_post``, the paper's placement) and
applies the intervention at the first ``f`` and last ``l`` *prompt* tokens. Which tokens are the prompt:

* inside :meth:`prompt_positions` (what :func:`fit_intervention` and the evaluator use): the mask given;
* otherwise the non-pad tokens of a forward that covers the whole attention mask (a plain call or the
  prefill pass of ``generate``, left or right padded). A decoding step of ``generate`` (one new token
  after a cache) is never intervened, so generated tokens are never edited.

Nothing touches the weights (``_modifies_weights = False``); ``restore()`` removes the hooks.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trustlab.core.arguments import PATH, takes_any, validate_args
from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError, NotFittedError
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.core.seeding import seed_alias
from trustlab.methods.dint._paper import PAPER

__all__ = ["LoReFT", "DReFT", "ReFTInfo", "load_intervention"]


def _positions_ok(v: Any) -> bool:
    from trustlab.methods.dint._modules import _POS_RE

    if not isinstance(v, str) or not v:
        return False
    m = _POS_RE.match(v)
    return m is not None and int(m.group(1) or 0) + int(m.group(2) or 0) > 0


_POSITIONS = Satisfies(_positions_ok, "a position spec 'f<int>+l<int>' (e.g. 'f4+l4', 'f3', 'l2') selecting >= 1 "
                       "token", ["x4", "f0+l0", "", 3], valid="f4+l4")


def _bounds_ok(v: Any) -> bool:
    return (isinstance(v, tuple | list) and len(v) == 2 and all(isinstance(b, int | float) for b in v)
            and 0 < float(v[0]) < float(v[1]))


_BOUNDS = Satisfies(_bounds_ok, "a pair (lo, hi) of sigma bounds with 0 < lo < hi", [(0.5, 0.1), (0.0, 1.0), 3],
                    valid=(1e-3, 1.0))


@dataclass
class ReFTInfo(EditInfo):
    """What ``apply`` did: the hooked block, rank, positions and the number of intervention parameters."""

    layer: int = -1
    rank: int = 0
    positions: str = ""
    n_params: int = 0


class _State:
    """Which tokens are the prompt for the current forward (shared by the hooks of one intervention)."""

    def __init__(self) -> None:
        self.prompt_mask: Any = None
        self.call_mask: Any = None
        self.decoding = False


class _ReFTBase(ModelEdit):
    paper: ClassVar[PaperInfo] = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": False, "requires": ("torch", "transformers")}
    _modifies_weights: ClassVar[bool] = False
    _info_class = ReFTInfo
    _default_lr: ClassVar[float] = 9e-4
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "layer": [Interval(int, 0, None)], "rank": [Interval(int, 1, None)], "positions": [_POSITIONS],
        "shared": [Boolean()], "random_state": ["random_state"],
    }

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"layer": 0, "rank": 4, "positions": "f2+l2", "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        import torch

        from trustlab.llm import tiny_random_llama

        return {"model": lambda: tiny_random_llama(n_layers=2)[0], "args": (), "kwargs": {},
                "forward_input": {"input_ids": torch.tensor([[5, 17, 301, 12, 9, 40]])}}

    # ------------------------------------------------------------------------------------------ modules
    def _new_module(self, d_model: int) -> Any:
        raise NotImplementedError  # pragma: no cover - abstract

    def _module_kwargs(self) -> dict[str, Any]:
        return {}

    def _check_model(self, model: Any) -> Any:
        from trustlab.llm import dims
        from trustlab.llm.sites import unwrap

        d = dims(unwrap(model))
        if self.layer >= d.n_layers:
            raise InputError(f"The 'layer' parameter of {type(self).__name__} must be a block index in "
                             f"[0, {d.n_layers - 1}] for this model. Got {self.layer} instead.")
        if self.rank > d.d_model:
            raise InputError(f"The 'rank' parameter of {type(self).__name__} must be <= the hidden size "
                             f"{d.d_model} (R has orthonormal rows). Got {self.rank} instead.")
        return d

    @validate_args(d_model=[Interval(int, 1, None)])
    def build(self, d_model: int) -> Any:
        """Create fresh intervention modules for hidden size ``d_model`` (seeded by ``random_state``)."""
        import torch

        from trustlab.core.seeding import check_random_state, isolated_global_rng, spawn_seed

        seed = spawn_seed(check_random_state(self.random_state))
        with isolated_global_rng(seed):
            mods = [self._new_module(d_model) for _ in range(1 if self.shared else 2)]
        self.module_ = torch.nn.ModuleList(mods).eval()
        self.d_model_ = int(d_model)
        self.seed_ = seed
        self.reset_noise(seed)
        return self.module_

    @seed_alias
    @validate_args(random_state=["random_state"])
    def reset_noise(self, random_state: Any) -> None:
        """Re-seed the sampling noise of D-ReFT modules (a local torch.Generator; no-op for LoReFT); module
        ``i`` gets the seed ``as_seed(random_state) + i`` (an int is kept as is)."""
        from trustlab.core.seeding import as_seed, torch_generator

        seed = as_seed(random_state)
        for i, m in enumerate(getattr(self, "module_", [])):
            if hasattr(m, "generator"):
                m.generator = torch_generator(seed + i)

    def _apply(self, model: Any, handle: EditHandle) -> None:
        d = self._check_model(model)
        if getattr(self, "module_", None) is None or getattr(self, "d_model_", None) != d.d_model:
            self.build(d.d_model)
        self.reset_noise(self.seed_)  # every apply draws the same noise sequence
        self.module_.to(_device(model)).eval()
        self._install(model, handle)
        info = handle.info
        info.layer, info.rank, info.positions = self.layer, self.rank, self.positions
        info.n_params = self.n_params

    @property
    def n_params(self) -> int:
        """Trainable parameters of the intervention (after ``apply``/``build``)."""
        if getattr(self, "module_", None) is None:
            raise NotFittedError(f"{type(self).__name__} has no modules yet: call apply(model) or build(d_model).")
        return int(sum(p.numel() for p in self.module_.parameters()))

    # -------------------------------------------------------------------------------------------- hooks
    def _install(self, model: Any, handle: EditHandle) -> None:
        from trustlab.llm.sites import base_model, get_module, resolve_site, unwrap
        from trustlab.methods.dint._modules import parse_positions

        inner = unwrap(model)
        first, last = parse_positions(self.positions)
        state = self.__dict__.setdefault("_state", _State())
        mods = self.module_

        def on_call(module: Any, args: Any, kwargs: Any) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            emb = kwargs.get("inputs_embeds")
            t = (ids if ids is not None else emb).shape[1]
            att, past = kwargs.get("attention_mask"), kwargs.get("past_key_values")
            past_len = int(past.get_seq_length()) if past is not None and hasattr(past, "get_seq_length") else 0
            state.decoding = past_len > 0 or (att is not None and att.ndim == 2 and att.shape[1] > t)
            state.call_mask = att if (att is not None and att.ndim == 2 and att.shape[1] == t) else None

        def after_call(module: Any, args: Any, kwargs: Any, output: Any) -> None:
            state.call_mask, state.decoding = None, False

        def on_block(module: Any, args: Any, output: Any) -> Any:
            h = output[0] if isinstance(output, tuple) else output
            new = self._edit_states(h, state, mods, first, last)
            if new is None:
                return None
            return (new, *output[1:]) if isinstance(output, tuple) else new

        site = resolve_site(inner, f"blocks.{self.layer}.resid_post")
        base = base_model(inner)
        handle.add_hook(base.register_forward_pre_hook(on_call, with_kwargs=True))
        handle.add_hook(base.register_forward_hook(after_call, with_kwargs=True, always_call=True))
        handle.add_hook(get_module(inner, site.module_path).register_forward_hook(on_block))

    @staticmethod
    def _edit_states(h: Any, state: _State, mods: Any, first: int, last: int) -> Any:
        import torch

        from trustlab.methods.dint._modules import select_positions

        b, t = h.shape[0], h.shape[1]
        if state.prompt_mask is not None:
            valid = state.prompt_mask.to(h.device)
            if tuple(valid.shape) != (b, t):
                raise InputError(f"The prompt mask has shape {tuple(valid.shape)} but the states are [{b}, {t}, d]; "
                                 "give one mask row per sequence of the batch.")
        elif state.decoding:
            return None  # a generated token: never intervened
        elif state.call_mask is not None:
            valid = state.call_mask.to(h.device).bool()
        else:
            valid = torch.ones((b, t), dtype=torch.bool, device=h.device)
        f_mask, l_mask = select_positions(valid, first, last)
        if len(mods) == 1:
            sel = f_mask | l_mask
            return torch.where(sel[..., None], mods[0](h), h)
        out = torch.where(l_mask[..., None], mods[1](h), h)
        return torch.where(f_mask[..., None], mods[0](h), out)

    @takes_any(prompt_mask="a [B, T] mask entered once per batch on the hot path; torch.as_tensor(...).bool() "
                           "takes any tensor or array")
    @contextlib.contextmanager
    def prompt_positions(self, prompt_mask: Any) -> Iterator[None]:
        """Inside the block, forwards use ``prompt_mask`` ``[B, T]`` (True at prompt tokens) for positions."""
        import torch

        state = self.__dict__.setdefault("_state", _State())
        before = state.prompt_mask
        state.prompt_mask = torch.as_tensor(prompt_mask).bool()
        try:
            yield
        finally:
            state.prompt_mask = before

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_state", None)
        return state

    # -------------------------------------------------------------------------------------- save/load
    @validate_args(path=[PATH])
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the intervention to ``path`` (a safetensors file, parameters in its metadata); atomic."""
        from safetensors.torch import save_file

        from trustlab.core.files import atomic_write

        if getattr(self, "module_", None) is None:
            raise NotFittedError(f"{type(self).__name__}.save needs modules: call apply(model) or build(d_model).")
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params(deep=False).items()
                  if k != "random_state"}
        meta = {"class": type(self).__name__, "params": json.dumps(params), "d_model": str(self.d_model_),
                "seed": str(self.seed_)}
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.module_.state_dict().items()}
        path = Path(path)
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))
        return path


def _device(model: Any) -> Any:
    from trustlab.llm.sites import model_device

    return model_device(model)


class LoReFT(_ReFTBase):
    """LoReFT (low-rank linear subspace ReFT) on block ``layer``'s output at prompt positions.

    Parameters
    ----------
    layer : int
        Block whose output (residual stream) is edited; 0 is the D-Intervention paper's setting.
    rank : int
        Rank r of the subspace (R is r x d with orthonormal rows).
    positions : str, default="f4+l4"
        First f and last l prompt tokens (``"f7+l7"`` in the paper's math runs).
    shared : bool, default=True
        One intervention for the first and the last positions (pyreft's ``--share_weights``); False: two.
    random_state : int, Generator or None

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> with LoReFT(layer=0, rank=4, random_state=0).apply(model) as handle:
    ...     handle.info.n_params
    580
    """

    def __init__(self, *, layer: int = 0, rank: int = 8, positions: str = "f4+l4", shared: bool = True,
                 random_state: Any = None) -> None:
        self.layer, self.rank, self.positions, self.shared, self.random_state = layer, rank, positions, shared, random_state

    def _new_module(self, d_model: int) -> Any:
        from trustlab.methods.dint._modules import LoReFTModule

        return LoReFTModule(d_model, self.rank)


class DReFT(_ReFTBase):
    """D-ReFT: LoReFT with a Gaussian source ``z = mu(h) + sigma(h) * eps`` (the released VIBreftIntervention).

    Parameters
    ----------
    layer, rank, positions, shared, random_state : as :class:`LoReFT`
    sigma_param : {"official_clamp", "bounded_sigmoid"}, default="official_clamp"
        ``official_clamp``: the released clamps (sigma in [0.001, 0.2]; on real activations pinned at 0.2
        with zero gradient). ``bounded_sigmoid``: sigma learned in ``sigma_bounds`` (starts at 0.2).
    sigma_bounds : (lo, hi), default=(0.001, 1.0)
        Bounds of the learned sigma (``bounded_sigmoid`` only).
    inference : {"sample", "mean"}, default="sample"
        Outside training: draw z (the released code, seeded by a local generator) or use z = mu.
    kl_beta : float >= 0, default=0
        Weight of KL(N(mu, sigma^2) || N(0, I)) in the training loss (the paper's default is 0).
    """

    _default_lr: ClassVar[float] = 3e-3
    tags: ClassVar[dict[str, Any]] = {"stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_ReFTBase._constraints, "sigma_param": [Options(("official_clamp", "bounded_sigmoid"))],
        "sigma_bounds": [_BOUNDS], "inference": [Options(("sample", "mean"))], "kl_beta": [Interval(float, 0, None)],
    }

    def __init__(self, *, layer: int = 0, rank: int = 8, positions: str = "f4+l4", shared: bool = True,
                 sigma_param: str = "official_clamp", sigma_bounds: tuple[float, float] = (1e-3, 1.0),
                 inference: str = "sample", kl_beta: float = 0.0, random_state: Any = None) -> None:
        self.layer, self.rank, self.positions, self.shared = layer, rank, positions, shared
        self.sigma_param, self.sigma_bounds, self.inference, self.kl_beta = sigma_param, sigma_bounds, inference, kl_beta
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"layer": 0, "rank": 4, "positions": "f2+l2", "random_state": 0},
                {"layer": 1, "rank": 3, "sigma_param": "bounded_sigmoid", "inference": "mean", "shared": False,
                 "random_state": 0}]

    def _new_module(self, d_model: int) -> Any:
        from trustlab.methods.dint._modules import DReFTModule

        m = DReFTModule(d_model, self.rank, self.sigma_param, tuple(self.sigma_bounds))
        m.inference = self.inference
        return m

    def _apply(self, model: Any, handle: EditHandle) -> None:
        super()._apply(model, handle)
        for m in self.module_:
            m.inference = self.inference

    @validate_args(mode=[Options(("sample", "mean"))])
    @contextlib.contextmanager
    def inference_mode(self, mode: str) -> Iterator[None]:
        """Temporarily evaluate with ``"sample"`` or ``"mean"`` inference."""
        if mode not in ("sample", "mean"):
            from trustlab.core.exceptions import did_you_mean

            raise ConfigError(f"The 'mode' argument of DReFT.inference_mode must be one of {{'sample', 'mean'}}. "
                              f"Got {mode!r} instead.{did_you_mean(mode, ['sample', 'mean'])}")
        before = [m.inference for m in self.module_]
        for m in self.module_:
            m.inference = mode
        try:
            yield
        finally:
            for m, b in zip(self.module_, before, strict=True):
                m.inference = b


@validate_args(path=[str, os.PathLike])
def load_intervention(path: str | os.PathLike[str]) -> LoReFT | DReFT:
    """Read an intervention written by ``save`` (safetensors); the modules are ready for ``apply``.

    Example
    -------
    >>> import tempfile, os
    >>> lo = LoReFT(layer=0, rank=2, random_state=0); _ = lo.build(16)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = load_intervention(lo.save(os.path.join(d, "i.safetensors")))
    >>> type(back).__name__, back.rank
    ('LoReFT', 2)
    """
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise InputError(f"The 'path' argument of load_intervention must be an existing file. Got {str(p)!r}.")
    try:
        with safe_open(str(p), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - safe_open has no iterator
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{str(p)!r} is not a safetensors file ({exc}).") from exc
    classes = {"LoReFT": LoReFT, "DReFT": DReFT}
    if meta.get("class") not in classes:
        raise InputError(f"{str(p)!r} holds no trustlab intervention (metadata class {meta.get('class')!r}).")
    params = json.loads(meta["params"])
    if "sigma_bounds" in params:
        params["sigma_bounds"] = tuple(params["sigma_bounds"])
    obj = classes[meta["class"]](**params, random_state=int(meta["seed"]))
    obj.build(int(meta["d_model"]))
    obj.module_.load_state_dict(tensors)
    return obj
