"""DiffPure and FreqPure as Purifiers: ``transform(X) -> X`` (shape and [0, 1] range kept), pure torch.

One reverse-process core serves both (the released FreqPure code's ``denoise`` loop): per round with
``(t*, n)`` the input is noised to level ``t*`` in closed form, then ``n`` strided DDIM steps
(``eta = 1`` for ``sampler="ddpm"``, 0 for ``"ddim"``) run down to level 0; each step's clean estimate
``x0_hat`` is clipped to [-1, 1] (DiffPure) or guided in the frequency domain by a reference (FreqPure).
Rounds feed each other. ``purify_tensor`` is differentiable end to end (attacks call it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import AnyValue, InstanceOf, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.core.roles import Purifier
from trustlab.core.seeding import torch_generator
from trustlab.methods.freqpure._diffusion import DiffusionModel
from trustlab.methods.freqpure._paper import PAPER
from trustlab.methods.freqpure._spectral import band_mask, check_radius, default_radius, guide_spectrum

torch = require("torch", purpose="trustlab.methods.freqpure")

__all__ = ["DiffPure", "FreqPure", "step_sequence"]


def _int_or_ints(v: Any) -> bool:
    one = isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1
    many = isinstance(v, tuple | list) and len(v) >= 1 and all(
        isinstance(x, int | np.integer) and not isinstance(x, bool) and x >= 1 for x in v)
    return one or many


_POS = Satisfies(_int_or_ints, "an int >= 1 or a non-empty tuple of ints >= 1 (one per stage)",
                 [0, -3, (), (5, 0), 1.5, "10"], valid=10)


@validate_args(_example=lambda: {"t_star": 20, "steps": 5}, t_star=[Interval(int, 1, None)],
               steps=[Interval(int, 1, None)])
def step_sequence(t_star: int, steps: int) -> list[int]:
    """The released code's strided schedule of one round, as 1-based levels, ascending: ``s = t*/n``,
    levels ``s, 2s, ..., t*`` (its ``range(s, t*+1, s)`` minus one, as 0-based indices)."""
    if steps > t_star or t_star % steps:
        raise ConfigError(f"The 'steps' argument of step_sequence must divide t_star={t_star}. Got {steps} instead.")
    return _levels(t_star, steps)


def _levels(t_star: int, steps: int) -> list[int]:
    s = t_star // steps
    return list(range(s, t_star + 1, s))


class _DiffusionPurifier(Purifier):
    """Shared parameters and the reverse-process core of DiffPure and FreqPure."""

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch",)}
    _common: ClassVar[dict[str, list[Any]]] = {
        "t_star": [_POS], "steps": [_POS], "rounds": [_POS], "sampler": [Options(("ddpm", "ddim"))],
        "votes": [Interval(int, 1, None)], "model": [DiffusionModel, None], "batch_size": [Interval(int, 1, None)],
        "random_state": ["random_state"]}

    # -- schedule -----------------------------------------------------------------------------------------
    def _model(self) -> DiffusionModel:
        if self.model is not None:
            return self.model
        from trustlab.methods.freqpure._shipped import shared_shipped_ddpm

        return shared_shipped_ddpm()

    def _stages(self, model: DiffusionModel) -> list[tuple[int, int]]:
        """(t*, n) per round, stages expanded by their repeat counts; cross-argument rules checked here."""
        own = type(self).__name__
        cols = {k: (v,) if isinstance(v, int | np.integer) else tuple(v)
                for k, v in (("t_star", self.t_star), ("steps", self.steps), ("rounds", self.rounds))}
        n = max(len(v) for v in cols.values())
        for k, v in cols.items():
            if len(v) not in (1, n):
                raise ConfigError(f"The '{k}' parameter of {own} must have one entry per stage ({n}, as the longest of "
                                  f"t_star/steps/rounds) or a single value. Got {getattr(self, k)!r} instead.")
        cols = {k: v * n if len(v) == 1 else v for k, v in cols.items()}
        out = []
        for t, s, r in zip(cols["t_star"], cols["steps"], cols["rounds"]):
            if not 1 <= t <= model.n_steps:
                raise ConfigError(f"The 't_star' parameter of {own} must be in [1, {model.n_steps}] (the model's "
                                  f"diffusion levels). Got {self.t_star!r} instead.")
            if s > t or t % s:
                raise ConfigError(f"The 'steps' parameter of {own} must divide t_star (the strided schedule would "
                                  f"silently change otherwise). Got steps={self.steps!r} for t_star={self.t_star!r} "
                                  "instead.")
            out += [(int(t), int(s))] * int(r)
        return out

    # -- inputs ------------------------------------------------------------------------------------------
    def _check_images(self, x: Any, model: DiffusionModel, name: str, verb: str) -> None:
        own = f"{type(self).__name__}.{verb}"
        c, h, w = model.image_shape
        if tuple(x.shape[1:]) != (c, h, w):
            alt = f" or (n, {h}, {w})" if c == 1 else ""
            raise InputError(f"The '{name}' argument of {own} must have shape (n, {c}, {h}, {w}){alt} for this "
                             f"diffusion model. Got {tuple(x.shape)} instead.")
        lo, hi = float(x.min()), float(x.max())
        if lo < 0.0 or hi > 1.0:
            raise InputError(f"The '{name}' argument of {own} must hold pixel values in [0, 1] (rescale images in "
                             f"[-1, 1] or [0, 255] first). Got min {lo:.4g}, max {hi:.4g} instead.")

    # -- the reverse process ---------------------------------------------------------------------------
    def _guide_factory(self, model: DiffusionModel, x_in: Any, gen_ref: Any) -> Callable[[Any], Any]:
        return lambda x0: torch.clamp(x0, -1.0, 1.0)

    def _round(self, model: DiffusionModel, x_in: Any, t_star: int, steps: int, gen: Any, gen_ref: Any) -> Any:
        eta = 1.0 if self.sampler == "ddpm" else 0.0
        levels = _levels(t_star, steps)
        guide = self._guide_factory(model, x_in, gen_ref)
        x = model.q_sample(x_in, t_star, torch.randn(x_in.shape, generator=gen, dtype=x_in.dtype))
        for k in range(len(levels) - 1, -1, -1):
            i, j = levels[k], (levels[k - 1] if k > 0 else 0)
            e = model.eps(x, i)
            x0 = guide(model.x0_from_eps(x, i, e))
            if j == 0:
                x = x0
                continue
            ai, aj = model.alpha_bar(i), model.alpha_bar(j)
            c1 = eta * ((1 - ai / aj) * (1 - aj) / (1 - ai)) ** 0.5
            c2 = max(1 - aj - c1 ** 2, 0.0) ** 0.5
            x = aj ** 0.5 * x0 + c1 * torch.randn(x.shape, generator=gen, dtype=x.dtype) + c2 * e
        return x

    def _purify(self, x01: Any, model: DiffusionModel, stages: list[tuple[int, int]], gen: Any) -> Any:
        # the reference's noise comes from its own stream, so FreqPure and DiffPure share the chain's noise
        gen_ref = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
        x = 2.0 * x01 - 1.0
        for t_star, steps in stages:
            x = self._round(model, x, t_star, steps, gen, gen_ref)
        return torch.clamp((x + 1.0) / 2.0, 0.0, 1.0)

    def _prepare(self) -> tuple[DiffusionModel, list[tuple[int, int]]]:
        model = self._model()
        stages = self._stages(model)
        self._check_guidance(model)
        return model, stages

    def _check_guidance(self, model: DiffusionModel) -> None:
        return None

    # -- verbs -------------------------------------------------------------------------------------------
    def _transform(self, X: np.ndarray) -> np.ndarray:
        model, stages = self._prepare()
        squeeze = X.ndim == 3 and model.image_shape[0] == 1
        x = X[:, None] if squeeze else X
        self._check_images(x, model, "X", "transform")
        dtype = next(model.parameters()).dtype
        gen = torch_generator(self._rng)
        out = []
        with torch.no_grad():
            for start in range(0, len(x), self.batch_size):
                xb = torch.as_tensor(np.ascontiguousarray(x[start:start + self.batch_size]), dtype=dtype)
                out.append(self._purify(xb, model, stages, gen).numpy())
        res = np.concatenate(out).astype(X.dtype if X.dtype.kind == "f" else np.float32)
        return res[:, 0] if squeeze else res

    @validate_args(x=[AnyValue("checked by the body: a float torch tensor (B, C, H, W) (InputError naming x)")],
                   generator=[None, InstanceOf(torch.Generator)])
    def purify_tensor(self, x: Any, *, generator: Any = None) -> Any:
        """Differentiable purification of a torch tensor ``(B, C, H, W)`` in [0, 1] (no vote).

        ``generator`` (a ``torch.Generator``) supplies every noise draw; without one, a generator made from
        ``random_state`` is used. Gradients flow through the whole reverse process (and, for FreqPure, the
        frequency guidance and the reference), so adaptive attacks can differentiate it.
        """
        self._validate_params()
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or not x.is_floating_point():
            raise InputError(f"The 'x' argument of {type(self).__name__}.purify_tensor must be a float torch tensor "
                             f"(B, C, H, W). Got {type(x).__name__} {getattr(x, 'shape', '')} instead.")
        model, stages = self._prepare()
        self._check_images(x.detach(), model, "x", "purify_tensor")
        if generator is None:
            generator = torch_generator(self.random_state)
        return self._purify(x.to(next(model.parameters()).dtype), model, stages, generator)


class DiffPure(_DiffusionPurifier):
    """DiffPure (Nie et al., ICML 2022), DDPM discretisation: diffuse to ``t_star`` and run the reverse
    process back with ``steps`` strided steps (``steps = t_star`` with ``sampler="ddpm"`` is exactly the
    DDPM ancestral sampler of DiffPure's ``diffpure_ddpm.py``); ``x0_hat`` clipped to [-1, 1] at each step.

    ``t_star``, ``steps`` and ``rounds`` may be tuples (one entry per stage, each stage repeated
    ``rounds`` times: Lee & Kim's multi-round purification). ``votes``: purifications per input whose
    classifier labels are majority-voted by :func:`defended_predict`. ``model``: a
    :class:`DiffusionModel` (default: the shipped 16x16 digits DDPM).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((2, 1, 16, 16))
    >>> DiffPure(t_star=20, steps=2, random_state=0).transform(X).shape
    (2, 1, 16, 16)
    """

    _constraints: ClassVar[dict[str, list[Any]]] = dict(_DiffusionPurifier._common)

    def __init__(self, *, t_star: Any = 100, steps: Any = 100, rounds: Any = 1, sampler: str = "ddpm",
                 votes: int = 1, model: DiffusionModel | None = None, batch_size: int = 256,
                 random_state: Any = None) -> None:
        self.t_star = t_star
        self.steps = steps
        self.rounds = rounds
        self.sampler = sampler
        self.votes = votes
        self.model = model
        self.batch_size = batch_size
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"t_star": 20, "steps": 2, "random_state": 0}, {"t_star": (10, 20), "steps": (1, 2), "rounds": (2, 1),
                                                                 "sampler": "ddim"}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"X": np.random.default_rng(0).random((3, 1, 16, 16))}


class FreqPure(_DiffusionPurifier):
    """FreqPure (Pei et al., ICML 2025): DiffPure's reverse process with every step's ``x0_hat`` guided in
    the frequency domain by a reference built from the round's input.

    ASE: the amplitude inside radius ``r_amp`` comes from the reference; PSP: the phase inside ``r_phase``
    is replaced by the reference's (``projection="replace"``, what the released code does) or projected to
    within ``delta`` radians of it (``"clip"``, the paper's text, wrapped differences). ``r = 0`` switches a
    component off (``r_phase=0``: ASE only; ``r_amp=0``: PSP only; both 0: DiffPure with the same noise).
    ``reference="denoised"`` (the code since May 2025): the round input noised to ``ref_level`` and denoised
    in one step, with fresh noise at every reverse step (``reference_refresh="step"``) or once per round
    (``"round"``, cheaper); ``"input"`` (the paper's text): the round input itself.

    Defaults follow the script behind the paper's CIFAR-10 numbers (``cifar10_v2.sh``: 5 x (20, 5) then
    5 x (50, 5), ``r = 3`` of 32x32, 10 votes). ``r_amp="auto"`` / ``r_phase="auto"`` (the default) scale
    that radius with the model's image side (:func:`default_radius`: 1.5 for 16x16, 3 for 32x32, 6 for 64x64);
    a number is used as given.
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_DiffusionPurifier._common, "r_amp": [Interval(float, 0, None), Options(("auto",))],
        "r_phase": [Interval(float, 0, None), Options(("auto",))],
        "delta": [Interval(float, 0, float(np.pi))], "reference": [Options(("denoised", "input"))],
        "ref_level": [Interval(int, 1, None)], "projection": [Options(("replace", "clip"))],
        "reference_refresh": [Options(("step", "round"))]}

    def __init__(self, *, t_star: Any = (20, 50), steps: Any = (5, 5), rounds: Any = (5, 5), r_amp: Any = "auto",
                 r_phase: Any = "auto", delta: float = 0.3, reference: str = "denoised", ref_level: int = 50,
                 projection: str = "replace", reference_refresh: str = "step", sampler: str = "ddpm",
                 votes: int = 10, model: DiffusionModel | None = None, batch_size: int = 256,
                 random_state: Any = None) -> None:
        self.t_star = t_star
        self.steps = steps
        self.rounds = rounds
        self.r_amp = r_amp
        self.r_phase = r_phase
        self.delta = delta
        self.reference = reference
        self.ref_level = ref_level
        self.projection = projection
        self.reference_refresh = reference_refresh
        self.sampler = sampler
        self.votes = votes
        self.model = model
        self.batch_size = batch_size
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"t_star": 20, "steps": 2, "rounds": 1, "r_amp": 1.5, "r_phase": 1.5, "votes": 1, "random_state": 0},
                {"t_star": 20, "steps": 1, "rounds": 1, "r_amp": 2.0, "r_phase": 1.0, "projection": "clip",
                 "reference": "input", "sampler": "ddim", "votes": 1}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"X": np.random.default_rng(0).random((3, 1, 16, 16))}

    @validate_args(h=[Interval(int, 2, None)], w=[Interval(int, 2, None)])
    def radii(self, h: int, w: int) -> tuple[float, float]:
        """``(r_amp, r_phase)`` for ``h x w`` images, ``"auto"`` resolved by :func:`default_radius`."""
        auto = default_radius(h, w)
        return tuple(auto if getattr(self, n) == "auto" else float(getattr(self, n)) for n in ("r_amp", "r_phase"))

    def _check_guidance(self, model: DiffusionModel) -> None:
        _, h, w = model.image_shape
        for name, r in zip(("r_amp", "r_phase"), self.radii(h, w), strict=True):
            check_radius(type(self).__name__, name, r, h, w)
        if self.ref_level > model.n_steps:
            raise ConfigError(f"The 'ref_level' parameter of {type(self).__name__} must be in [1, {model.n_steps}]. "
                              f"Got {self.ref_level!r} instead.")

    def _reference(self, model: DiffusionModel, x_in: Any, gen_ref: Any) -> Any:
        if self.reference == "input":
            return x_in
        noise = torch.randn(x_in.shape, generator=gen_ref, dtype=x_in.dtype)
        x_u = model.q_sample(x_in, self.ref_level, noise)
        return model.x0_from_eps(x_u, self.ref_level, model.eps(x_u, self.ref_level))

    def _guide_factory(self, model: DiffusionModel, x_in: Any, gen_ref: Any) -> Callable[[Any], Any]:
        _, h, w = model.image_shape
        r_amp, r_phase = self.radii(h, w)
        amp = torch.as_tensor(band_mask(h, w, r_amp))
        pha = torch.as_tensor(band_mask(h, w, r_phase))
        active = bool(amp.any() or pha.any())  # empty bands: no reference, the estimate is only clipped
        fixed = self._reference(model, x_in, gen_ref) if active and self.reference_refresh == "round" else None

        def guide(x0: Any) -> Any:
            est01 = torch.clamp((x0 + 1) / 2, 0, 1)
            if not active:
                ref01 = est01
            else:
                ref = fixed if fixed is not None else self._reference(model, x_in, gen_ref)
                ref01 = torch.clamp((ref + 1) / 2, 0, 1)
            out = guide_spectrum(est01, ref01, amp, pha, float(self.delta), self.projection)
            return 2.0 * out - 1.0

        return guide
