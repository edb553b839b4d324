"""A tabular LLM classifier: serialised rows, LoRA on the top blocks trained by top-K replay, verbaliser logits.

:class:`TabularLLM` is the shared backbone (one causal LM wrapped once with LoRA, one replay cache per set
of rows, reused by every seed); :class:`TabularLLMClassifier` is one fine-tune (its own LoRA weights,
re-initialised from its seed, trained with :func:`trustlab.llm.train`), so m fine-tunes cost one bottom
pass per row set plus m top-block trainings.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import AnyValue, Boolean, InstanceOf, Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.roles import Predictor
from trustlab.core.seeding import as_seed, isolated_global_rng, seed_alias, spawn_seed
from trustlab.methods.multiplicity._paper import PAPER
from trustlab.methods.multiplicity._serialize import serialize_rows, verbalizer_ids

__all__ = ["TabularLLM", "TabularLLMClassifier"]


def _load(model: Any) -> tuple[Any, Any]:
    from trustlab.llm import load_model, tiny_random_llama

    if model is None:
        return tuple(load_model())
    if model == "tiny":
        return tuple(tiny_random_llama(n_layers=4))
    if isinstance(model, str):
        return tuple(load_model(model))
    if isinstance(model, tuple | list) and len(model) == 2:
        return model[0], model[1]
    raise InputError("TabularLLM: 'model' must be None (SmolLM2-135M-Instruct), 'tiny', a registered model name or "
                     f"a (model, tokenizer) pair. Got {type(model).__name__}.")


#: backbones alive in this process by spec, and the last one rebuilt here from a pickled spec (kept, so the
#: tasks an executor worker runs share one load): a pickled TabularLLM built from a model name is its spec
_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_REBUILT: dict[str, Any] = {}


def _by_spec(key: str, model: Any, settings: dict[str, Any]) -> TabularLLM:
    """The backbone of ``key`` in this process: the live one, or one built (once) from the model name."""
    bb = _LIVE.get(key)
    if bb is None:
        bb = TabularLLM(model, **settings)
        _REBUILT.clear()
        _REBUILT[key] = _LIVE[key] = bb
    return bb


#: row indices of a forward's sequences; the objective calls logits once per training step
_HOT_ROWS = "row indices into fwd's sequences (the training objective calls logits once per step: no wrapper)"


class TabularLLM:
    """A causal LM with LoRA on its top blocks, shared by the fine-tunes of a multiplicity study.

    Parameters
    ----------
    model : None, "tiny", a model name or (model, tokenizer)
        None loads SmolLM2-135M-Instruct offline; "tiny" a 4-block random llama (tests).
    layers, modules, r, alpha, dropout : LoRA settings (:func:`trustlab.llm.add_lora`)
    verbalizers : label words, one per class in class order; each must be a single token.
    max_prompt_tokens : int
        A serialised row longer than this is refused (a free-text column beyond the context).

    A backbone is a shared resource: ``copy.deepcopy`` (and so ``sklearn.clone`` of a classifier holding
    it) returns the same object; each classifier keeps its own adapter weights and loads them before use.
    A backbone built from a model name (None, "tiny", a registered name) pickles as its name and settings:
    an executor's worker builds it once and keeps it, and a fitted classifier coming back from a worker
    carries only its adapter and is re-attached to the driver's backbone (issue 46). One built from a
    ``(model, tokenizer)`` pair pickles whole.
    """

    def __init__(self, model: Any = None, *, layers: Any = "top2", modules: Any = "all-linear", r: int = 8,
                 alpha: float = 16, dropout: float = 0.05, verbalizers: Sequence[str] = (" No", " Yes"),
                 max_prompt_tokens: int = 256, cache_size: int = 8):
        from trustlab.llm import add_lora

        base, self.tokenizer = _load(model)
        settings = {"layers": layers, "modules": modules, "r": r, "alpha": alpha, "dropout": dropout,
                    "verbalizers": list(verbalizers), "max_prompt_tokens": max_prompt_tokens, "cache_size": cache_size}
        self._spec = (None if not (model is None or isinstance(model, str))
                      else (repr((model, sorted(settings.items()))), model, settings))
        self.verbalizers = list(verbalizers)
        self.verbalizer_ids = verbalizer_ids(self.tokenizer, self.verbalizers)
        self.model = add_lora(base, layers=layers, modules=modules, r=r, alpha=alpha, dropout=dropout, random_state=0)
        self.model.eval()
        self.max_prompt_tokens, self.cache_size = int(max_prompt_tokens), int(cache_size)
        self._forwards: OrderedDict[tuple[str, bool], Any] = OrderedDict()

    def __deepcopy__(self, memo: dict[int, Any]) -> TabularLLM:
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self._spec is None:
            return super().__reduce_ex__(protocol)
        _LIVE[self._spec[0]] = self
        return _by_spec, self._spec

    @validate_args(prompts=[SequenceOf(str)], replay=[Boolean()])
    def forward_for(self, prompts: Sequence[str], *, replay: bool = True) -> Any:
        """A PolicyForward on the prompts (each followed by the first verbaliser), cached by content."""
        from trustlab.llm import PolicyForward, tokenize_pairs

        seqs = tokenize_pairs(self.tokenizer, list(prompts), [self.verbalizers[0]] * len(prompts), chat=False,
                              add_eos=False)
        longest = int(seqs.prompt_len.max())
        if longest > self.max_prompt_tokens:
            i = int(seqs.prompt_len.argmax())
            raise InputError(f"A serialised row is {longest} tokens, more than max_prompt_tokens="
                             f"{self.max_prompt_tokens} (row {i}: {prompts[i][:80]!r}...); a free-text column "
                             "probably exceeds the context: drop or shorten it.")
        key = (seqs.fingerprint(), replay)
        if key in self._forwards:
            self._forwards.move_to_end(key)
            return self._forwards[key]
        fwd = PolicyForward(self.model, seqs, replay="auto" if replay else None, share_prompts=False)
        self._forwards[key] = fwd
        while len(self._forwards) > self.cache_size:
            self._forwards.popitem(last=False)
        return fwd

    @seed_alias
    @validate_args(random_state=["random_state"])
    def reset_adapter(self, random_state: Any) -> None:
        """Re-initialise every LoRA weight from ``random_state`` (peft's init: Kaiming A, zero B); ``seed=`` is its
        deprecated name."""
        from peft.tuners.lora import LoraLayer

        with isolated_global_rng(as_seed(random_state)):
            for mod in self.model.modules():
                if isinstance(mod, LoraLayer):
                    mod.reset_lora_parameters("default", True)

    def adapter_state(self) -> dict[str, Any]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if ".lora_" in n}

    @validate_args(state=[InstanceOf(dict)])
    def load_adapter_state(self, state: dict[str, Any]) -> None:
        import torch

        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for n, v in state.items():
                params[n].copy_(v)

    @takes_any(fwd="the PolicyForward of forward_for (per training step: no wrapper)",
               rows=_HOT_ROWS, states="None or replay states of fwd (per training step: no wrapper)")
    def logits(self, fwd: Any, rows: Any, states: Any = None) -> Any:
        """Verbaliser logits ``[b, C]`` at each row's last prompt position (from ``states`` when given)."""
        import torch

        from trustlab.llm import head_logits

        h = fwd.hidden(rows) if states is None else fwd.replay_states(rows, states)
        last = torch.as_tensor(fwd.sequences.prompt_len[np.asarray(rows)] - 1, device=h.device)
        return head_logits(self.model, h[torch.arange(len(last), device=h.device), last],
                           token_ids=self.verbalizer_ids).float()

    def lora_dropouts(self) -> list[Any]:
        import torch

        return [m for n, m in self.model.named_modules() if ".lora_dropout." in n and isinstance(m, torch.nn.Dropout)]


class _VerbalizerObjective:
    """Cross-entropy over the verbaliser logits at the last prompt position (items = rows)."""

    def __init__(self, backbone: TabularLLM, fwd: Any, y: np.ndarray):
        import torch

        self.bb, self.fwd, self.y = backbone, fwd, torch.as_tensor(y, dtype=torch.long)
        self.n_items = len(y)

    def prepare(self) -> None:
        self.fwd.check_fresh()

    def __call__(self, rows: Any) -> Any:
        import torch

        from trustlab.llm import StepOutput

        logits = self.bb.logits(self.fwd, rows)
        target = self.y[np.asarray(rows)].to(logits.device)
        loss = torch.nn.functional.cross_entropy(logits, target)
        return StepOutput(loss, {"acc": float((logits.argmax(1) == target).float().mean())})


class TabularLLMClassifier(Predictor):
    """One LoRA fine-tune of a causal LM on serialised table rows; probabilities from the verbaliser logits.

    Parameters
    ----------
    backbone : TabularLLM, optional
        Shared by all fine-tunes of a study (default: a new SmolLM2 backbone at fit, kept as ``backbone_``).
    question : str
        Appended to each serialised row (``"... <question> Answer:"``).
    columns : list of str, optional
        Column names for array input (a DataFrame's own are used otherwise).
    steps, batch_size, lr, weight_decay, warmup_steps : training (:func:`trustlab.llm.train`, AdamW)
    missing : {"unknown", "raise"}
    max_value_chars : int
    eval_batch_size : int
    threads : int, optional
    prior : float in (0, 1), optional
        Per-model calibration of the positive rate (binary tasks): after training, the yes/no logit margin is
        shifted by ``offset_`` so that a fraction ``prior`` of the training rows is predicted positive (e.g. 0.5
        on class-balanced shots). Fine-tunes then differ by more than a global class bias (issue 47). None: the
        raw verbaliser logits.
    random_state : int, Generator or None
        Seeds the LoRA initialisation, the data order and LoRA dropout (the fine-tuning randomness).

    Examples
    --------
    >>> clf = TabularLLMClassifier(backbone=TabularLLM("tiny"), steps=2, question="Yes?")  # doctest: +SKIP
    >>> clf.fit([[1, 2], [3, 4]], [0, 1]).predict_proba([[1, 2]]).shape  # doctest: +SKIP
    (1, 2)
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"role": "predictor", "requires": ("torch", "transformers", "peft"),
                                      "stochastic": True, "allow_nan": True}  # NaN is written as "unknown"
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "backbone": [None, TabularLLM], "question": [str], "columns": [None, list, tuple],
        "steps": [Interval(int, 1, None)], "batch_size": [Interval(int, 1, None)],
        "lr": [Interval(float, 0, None, closed="neither")], "weight_decay": [Interval(float, 0, None)],
        "warmup_steps": [Interval(int, 0, None)], "missing": [Options(("unknown", "raise"))],
        "max_value_chars": [Interval(int, 1, None)], "eval_batch_size": [Interval(int, 1, None)],
        "threads": [None, Interval(int, 1, None)], "prior": [None, Interval(float, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, backbone: TabularLLM | None = None, question: str = "Positive?", columns: Any = None,
                 steps: int = 80, batch_size: int = 8, lr: float = 3e-3, weight_decay: float = 0.0,
                 warmup_steps: int = 5, missing: str = "unknown", max_value_chars: int = 64,
                 eval_batch_size: int = 32, threads: int | None = None, prior: float | None = None,
                 random_state: Any = 0):
        self.backbone = backbone
        self.question = question
        self.columns = columns
        self.steps = steps
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_steps = warmup_steps
        self.missing = missing
        self.max_value_chars = max_value_chars
        self.eval_batch_size = eval_batch_size
        self.threads = threads
        self.prior = prior
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"backbone": TabularLLM("tiny"), "steps": 2, "batch_size": 4, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.integers(0, 50, size=(12, 3)).astype(float)
        return {"X": X, "y": (X[:, 0] > 25).astype(int)}

    def _validate_X(self, X: Any, *, reset: bool) -> list[str]:
        if isinstance(X, str) or not hasattr(X, "__len__"):
            raise InputError(f"The 'X' argument of {type(self).__name__} must be a table (DataFrame or 2-d array). "
                             f"Got {type(X).__name__}.")
        cols = list(self.columns) if self.columns is not None else None
        arr = np.asarray(X.to_numpy() if hasattr(X, "to_numpy") else X, dtype=object)
        num = np.asarray([v for v in arr.ravel() if isinstance(v, int | float | np.number)], dtype=np.float64)
        if np.isinf(num).any():
            raise InputError(f"The 'X' argument of {type(self).__name__} contains inf, which has no text form; "
                             "NaN is written as 'unknown'.")
        prompts = serialize_rows(X, cols, question=self.question, missing=self.missing,
                                 max_value_chars=self.max_value_chars)
        width = len(prompts[0].split("; "))
        if reset:
            self.n_features_in_ = width
        elif width != getattr(self, "n_features_in_", width):
            raise InputError(f"{type(self).__name__}: X has {width} columns; the model was fitted on "
                             f"{self.n_features_in_}.")
        return prompts

    def _bb(self) -> TabularLLM:
        return getattr(self, "backbone_", None) or self.backbone or TabularLLM()

    def _fit(self, prompts: list[str], y: np.ndarray) -> None:
        from trustlab.llm import train

        bb = self._bb()
        if len(self.classes_) != len(bb.verbalizers):
            raise InputError(f"{type(self).__name__}: y has {len(self.classes_)} classes but the backbone has "
                             f"{len(bb.verbalizers)} verbalisers {bb.verbalizers}.")
        rs = self.random_state
        seed = int(rs) if isinstance(rs, int | np.integer) else spawn_seed(self._rng)
        fwd = bb.forward_for(prompts)
        bb.reset_adapter(seed)
        self.history_ = train(bb.model, _VerbalizerObjective(bb, fwd, y), steps=self.steps,
                              batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                              warmup_steps=self.warmup_steps, random_state=seed, threads=self.threads, device="cpu")
        self.adapter_ = bb.adapter_state()
        self.backbone_, self.seed_ = bb, seed
        self.offset_ = 0.0
        if self.prior is not None:
            if len(self.classes_) != 2:
                raise InputError(f"{type(self).__name__}: prior={self.prior} calibrates a binary task's positive "
                                 f"rate; y has {len(self.classes_)} classes. Pass prior=None.")
            z = self._logits_all(prompts)
            self.offset_ = float(np.quantile(z[:, 1] - z[:, 0], 1.0 - float(self.prior)))

    def _logits_all(self, prompts: list[str], dropout: bool = False) -> np.ndarray:
        import torch

        bb = self.backbone_
        bb.load_adapter_state(self.adapter_)
        fwd = bb.forward_for(prompts)
        out = []
        bb.model.eval()
        for d in bb.lora_dropouts() if dropout else []:
            d.train()
        with torch.no_grad():
            for s in range(0, len(prompts), self.eval_batch_size):
                out.append(bb.logits(fwd, np.arange(s, min(s + self.eval_batch_size, len(prompts)))))
        return self._shift(torch.cat(out).double()).numpy()

    def _shift(self, z: Any) -> Any:
        """The calibrated logits: the positive class's logit lowered by ``offset_`` (0 without ``prior``)."""
        off = getattr(self, "offset_", 0.0)
        if not off:
            return z
        z = z.clone()
        z[..., 1] = z[..., 1] - off
        return z

    def _predict_proba(self, prompts: list[str]) -> np.ndarray:
        z = self._logits_all(prompts)
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    # -------------------------------------------------------------------- measures beyond predict_proba
    def _stability_space(self, X: Any, space: str) -> Any:
        """The embedding space for :func:`local_stability` (adapter loaded, model in eval mode)."""
        import torch

        from trustlab.core.validation import check_is_fitted
        from trustlab.methods.multiplicity._stability import _Space

        check_is_fitted(self, "adapter_")
        prompts = self._validate_X(X, reset=False)
        bb = self.backbone_
        bb.load_adapter_state(self.adapter_)
        bb.model.eval()
        fwd = bb.forward_for(prompts, replay=space == "cached")
        plen = torch.as_tensor(fwd.sequences.prompt_len)

        def embed(rows: Any) -> tuple[Any, Any]:
            e = fwd.input_states(rows)
            pos = torch.arange(e.shape[1])[None, :]
            return e, pos < plen[torch.as_tensor(rows)][:, None]

        def proba(rows: Any, e: Any) -> Any:
            with torch.no_grad():
                return torch.softmax(self._shift(bb.logits(fwd, rows, states=e)), dim=-1)

        return _Space(len(prompts), embed, proba)

    @validate_args(X=[AnyValue("checked by _validate_X (InputError naming X)")], n_masks=[Interval(int, 2, None)],
                   p=[Interval(float, 0, 1, closed="neither")], random_state=["random_state"])
    def mc_dropout_proba(self, X: Any, n_masks: int = 16, p: float = 0.1, random_state: Any = 0) -> np.ndarray:
        """Probabilities ``[n_masks, n, C]`` under ``n_masks`` dropout masks (rate ``p``) on the LoRA path."""
        import torch

        from trustlab.core.validation import check_is_fitted

        check_is_fitted(self, "adapter_")
        if not isinstance(n_masks, int) or n_masks < 2 or not 0 < p < 1:
            raise InputError(f"mc_dropout_proba needs n_masks >= 2 and p in (0, 1). Got {n_masks!r}, {p!r}.")
        prompts = self._validate_X(X, reset=False)
        drops = self.backbone_.lora_dropouts()
        if not drops:
            raise InputError("mc_dropout_proba: the backbone's LoRA has no dropout modules (dropout=0).")
        old = [d.p for d in drops]
        seed = as_seed(random_state)  # an int as given; a Generator or None drawn once
        try:
            for d in drops:
                d.p = float(p)
            out = []
            with isolated_global_rng(seed):
                for _ in range(n_masks):
                    z = self._logits_all(prompts, dropout=True)
                    out.append(torch.softmax(torch.as_tensor(z), dim=-1).numpy())
        finally:
            for d, v in zip(drops, old):
                d.p = v
                d.eval()
        return np.stack(out)
