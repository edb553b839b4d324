"""Frequency-domain pieces in pure torch: amplitude/phase split and merge, radial bands, FreqPure's guidance
(ASE: amplitude spectrum exchange; PSP: phase spectrum projection) and the spectral-damage analysis.

Spectra are centred (``fftshift``); the radius of a bin is ``sqrt(u^2 + v^2)`` with integer frequencies
``u, v`` (``fftfreq * n``, shifted). Every op is differentiable: magnitudes and angles use guarded
formulas, so gradients stay finite where a bin is exactly zero.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.methods.freqpure")

__all__ = ["radius_map", "max_radius", "default_radius", "band_mask", "amplitude_phase", "from_amplitude_phase",
           "freq_guide", "SpectralDamage", "spectral_damage"]

_TINY = 1e-24


@functools.lru_cache(maxsize=32)
def _radius(h: int, w: int) -> np.ndarray:
    v = np.fft.fftshift(np.fft.fftfreq(h) * h)
    u = np.fft.fftshift(np.fft.fftfreq(w) * w)
    r = np.sqrt(v[:, None] ** 2 + u[None, :] ** 2)
    r.setflags(write=False)
    return r


@validate_args(h=[Interval(int, 1, None)], w=[Interval(int, 1, None)])
def radius_map(h: int, w: int) -> np.ndarray:
    """Radius ``sqrt(u^2 + v^2)`` of every bin of a centred ``h x w`` spectrum (DC at ``(h // 2, w // 2)``)."""
    return _radius(int(h), int(w)).copy()


@validate_args(h=[Interval(int, 1, None)], w=[Interval(int, 1, None)])
def max_radius(h: int, w: int) -> float:
    """The largest bin radius of an ``h x w`` spectrum (a band this wide holds every bin)."""
    return float(_radius(int(h), int(w)).max())


@validate_args(h=[Interval(int, 1, None)], w=[Interval(int, 1, None)], r=[Interval(float, 0, None)])
def band_mask(h: int, w: int, r: float) -> np.ndarray:
    """Bins with radius ``<= r``; ``r = 0`` is the empty band (the component is switched off)."""
    return _radius(int(h), int(w)) <= r if r > 0 else np.zeros((h, w), dtype=bool)


def _abs(z: Any) -> Any:
    return torch.sqrt(z.real ** 2 + z.imag ** 2 + _TINY)


def _angle(z: Any) -> Any:
    ok = (z.real ** 2 + z.imag ** 2) > _TINY
    re = torch.where(ok, z.real, torch.ones_like(z.real))
    im = torch.where(ok, z.imag, torch.zeros_like(z.imag))
    return torch.where(ok, torch.atan2(im, re), torch.zeros_like(re))


def _spectrum(x: Any) -> Any:
    return torch.fft.fftshift(torch.fft.fft2(x), dim=(-2, -1))


def _image(spec: Any) -> Any:
    return _abs(torch.fft.ifft2(torch.fft.ifftshift(spec, dim=(-2, -1))))


_IMG = ArrayLike(ndim=(2, 3, 4))
_MASK = Satisfies(lambda v: np.asarray(v).dtype == bool and np.asarray(v).ndim == 2, "a 2-d boolean mask (H, W)",
                  [np.zeros((2, 2)), "all", None], valid=np.zeros((2, 2), dtype=bool))


@validate_args(x=[_IMG])
def amplitude_phase(x: Any) -> tuple[Any, Any]:
    """Centred amplitude and phase (in ``(-pi, pi]``) of the 2-d FFT over the last two axes of ``x``."""
    spec = _spectrum(torch.as_tensor(x))
    return _abs(spec), _angle(spec)


@validate_args(amplitude=[ArrayLike(ndim=(2, 3, 4), low=0.0)], phase=[_IMG])
def from_amplitude_phase(amplitude: Any, phase: Any) -> Any:
    """The image back from a centred amplitude and phase: the modulus of the inverse FFT (as the released
    code does; for a real non-negative image this is the image itself)."""
    return _image(torch.as_tensor(amplitude) * torch.exp(1j * torch.as_tensor(phase)))


def _freq_example() -> dict[str, Any]:
    return {"est": torch.zeros(2, 2), "ref": torch.zeros(2, 2), "amp_mask": torch.zeros(2, 2, dtype=torch.bool),
            "phase_mask": torch.zeros(2, 2, dtype=torch.bool)}


@validate_args(_example=_freq_example, est=[ArrayLike(ndim=(2, 3, 4), low=0.0, high=1.0)],
               ref=[ArrayLike(ndim=(2, 3, 4), low=0.0, high=1.0)], amp_mask=[_MASK], phase_mask=[_MASK],
               delta=[Interval(float, 0, float(np.pi))], projection=[Options(("replace", "clip"))])
def freq_guide(est: Any, ref: Any, *, amp_mask: Any, phase_mask: Any, delta: float = 0.3,
               projection: str = "replace") -> Any:
    """FreqPure's guidance of an estimate by a reference, both images in [0, 1] of shape (..., H, W).

    ASE: inside ``amp_mask`` the estimate's amplitude is replaced by the reference's. PSP: inside
    ``phase_mask`` the estimate's phase is replaced by the reference's (``projection="replace"``, what the
    released code effectively does) or projected into ``[phase_ref - delta, phase_ref + delta]`` using the
    wrapped difference (``"clip"``, the paper's text). The result is the modulus of the inverse FFT clipped
    to [0, 1]. With empty masks the estimate comes back unchanged (to float precision).
    """
    est, ref = torch.as_tensor(est), torch.as_tensor(ref)
    if est.shape != ref.shape or tuple(est.shape[-2:]) != tuple(np.shape(amp_mask)) \
            or np.shape(amp_mask) != np.shape(phase_mask):
        raise InputError(f"The 'ref' argument of freq_guide must have the shape of 'est' {tuple(est.shape)} and the "
                         f"masks the shape of one image. Got ref {tuple(ref.shape)}, masks {np.shape(amp_mask)} and "
                         f"{np.shape(phase_mask)} instead.")
    return guide_spectrum(est, ref, torch.as_tensor(amp_mask), torch.as_tensor(phase_mask), float(delta), projection)


def guide_spectrum(est: Any, ref: Any, amp_mask: Any, phase_mask: Any, delta: float, projection: str) -> Any:
    """:func:`freq_guide` without argument checks (the purifiers' inner loop)."""
    fe, fr = _spectrum(est), _spectrum(ref)
    ae, ar = _abs(fe), _abs(fr)
    ue, ur = fe / ae, fr / ar
    amp = torch.where(amp_mask, ar, ae)
    if projection == "replace":
        unit = torch.where(phase_mask, ur, ue)
    else:
        d = torch.clamp(_angle(ue * torch.conj(ur)), -delta, delta)
        unit = torch.where(phase_mask, ur * torch.exp(1j * d), ue)
    return torch.clamp(_image(amp * unit), 0.0, 1.0)


# --------------------------------------------------------------------------------------------- analysis
@dataclass(frozen=True)
class SpectralDamage:
    """Per-radius damage of perturbed images vs their clean versions (radius bands ``round(rho) == r``).

    ``amplitude_rel``: median over images, channels and bins of ``|A_adv - A_clean| / (A_clean + 1e-6)``;
    ``amplitude_abs``: mean ``|A_adv - A_clean|``; ``phase``: mean wrapped ``|phase_adv - phase_clean|``
    (radians); ``energy``: the share of the perturbation's spectral energy in each band (sums to 1).
    """

    radii: tuple[int, ...]
    amplitude_rel: tuple[float, ...]
    amplitude_abs: tuple[float, ...]
    phase: tuple[float, ...]
    energy: tuple[float, ...]
    n_images: int

    def spearman(self) -> tuple[float, float]:
        """Spearman correlations of radius with (relative amplitude damage, phase damage)."""
        from scipy.stats import spearmanr

        return (float(spearmanr(self.radii, self.amplitude_rel)[0]), float(spearmanr(self.radii, self.phase)[0]))


def _as_images(X: Any, name: str) -> Any:
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim == 3:
        arr = arr[:, None]
    return torch.as_tensor(arr)


@validate_args(clean=[ArrayLike(ndim=(3, 4))], adversarial=[ArrayLike(ndim=(3, 4))],
               statistic=[Options(("median", "mean"))])
def spectral_damage(clean: Any, adversarial: Any, *, statistic: str = "median") -> SpectralDamage:
    """Amplitude and phase damage per frequency radius of ``adversarial`` images vs ``clean`` ones
    ((n, H, W) or (n, C, H, W), same shape). ``statistic`` aggregates the relative amplitude damage.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((4, 16, 16))
    >>> d = spectral_damage(x, np.clip(x + 0.05 * rng.standard_normal(x.shape), 0, 1))
    >>> d.radii[:3]
    (0, 1, 2)
    """
    c, a = _as_images(clean, "clean"), _as_images(adversarial, "adversarial")
    if c.shape != a.shape:
        raise InputError(f"The 'adversarial' argument of spectral_damage must have the shape of 'clean' "
                         f"{tuple(c.shape)}. Got {tuple(a.shape)} instead.")
    with torch.no_grad():
        sc, sa = _spectrum(c), _spectrum(a)
        ac, aa = _abs(sc).numpy(), _abs(sa).numpy()
        dphi = np.abs(_angle(sa * torch.conj(sc)).numpy())
        energy = (_abs(sa - sc) ** 2).numpy()
    bands = np.rint(_radius(c.shape[-2], c.shape[-1])).astype(int)
    radii = tuple(int(r) for r in np.unique(bands))
    rel = np.abs(aa - ac) / (ac + 1e-6)
    agg = np.median if statistic == "median" else np.mean
    out: dict[str, list[float]] = {"rel": [], "abs": [], "phase": [], "energy": []}
    total = float(energy.sum()) or 1.0
    for r in radii:
        m = bands == r
        out["rel"].append(float(agg(rel[..., m])))
        out["abs"].append(float(np.abs(aa - ac)[..., m].mean()))
        out["phase"].append(float(dphi[..., m].mean()))
        out["energy"].append(float(energy[..., m].sum()) / total)
    return SpectralDamage(radii, tuple(out["rel"]), tuple(out["abs"]), tuple(out["phase"]), tuple(out["energy"]),
                          int(c.shape[0]))


#: the paper's band radius (r = 3) and the image side it was set for (CIFAR-10, 32x32)
PAPER_RADIUS, PAPER_SIDE = 3.0, 32


@validate_args(h=[Interval(int, 2, None)], w=[Interval(int, 2, None)])
def default_radius(h: int, w: int) -> float:
    """FreqPure's default band radius for ``h x w`` images: the paper's ``r = 3`` of 32x32 scaled with the
    shorter side (1.5 for 16x16, 6 for 64x64), what ``r_amp="auto"`` / ``r_phase="auto"`` resolve to."""
    return PAPER_RADIUS * min(int(h), int(w)) / PAPER_SIDE


def check_radius(owner: str, name: str, r: float, h: int, w: int) -> None:
    """Refuse a band as wide as the whole spectrum (nothing would be purified); warn above half the bins."""
    import warnings

    from trustlab.core.exceptions import ConfigError, ScaleWarning

    rmax = max_radius(h, w)
    if r >= rmax:
        raise ConfigError(f"The '{name}' parameter of {owner} must be in [0, {rmax:.3f}) for {h}x{w} images (a band "
                          f"of radius >= {rmax:.3f} copies the whole spectrum of the reference, i.e. no "
                          f"purification). Got {r!r} instead.")
    frac = float(band_mask(h, w, float(r)).mean())
    if frac > 0.5:
        warnings.warn(f"{owner}: {name}={r} covers {100 * frac:.0f} % of the {h}x{w} spectrum; most of the image "
                      "is copied from the reference.", ScaleWarning, stacklevel=3)

