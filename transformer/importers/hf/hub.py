"""What a user typed, a model's folder or its name on the Hugging Face Hub ("org/name" or "name"),
turned into a local folder holding the model's files, through huggingface_hub and its cache.

    resolve       the folder: an existing one as it is; a hub name from the local cache first
                  (works with HF_HUB_OFFLINE=1), else downloaded into that cache
    is_hub_name   whether a text is a valid repository name (huggingface_hub's own rule)
    cache_dir     the hub cache huggingface_hub uses (HF_HUB_CACHE, HF_HOME, ...), read at each call
    ALLOWED_PATTERNS, download_patterns
                  the only files ever fetched: those the Hugging Face families read (config.json,
                  model.safetensors or its shards, the tokenizers' files), tf_model.h5 only from a
                  repository without safetensors; never a pickle (*.bin, *.pt, *.ckpt, ...)

A download is only ever of data: the folder it gives is opened like any other, by the family
its config.json names (transformer.importers.hf_family), which reads each file as data. Every
failure (a name that is neither a folder nor a repository, not in the cache while offline, not
on the hub, gated, a network error) is a CheckpointError saying what to do instead.
"""

from __future__ import annotations

import os
import threading
from concurrent import futures
from fnmatch import fnmatch
from pathlib import Path

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    HTTPError,  # httpx2's: every connection, timeout and proxy error
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    XetDownloadError,
)
from huggingface_hub.utils import tqdm as hf_tqdm
from huggingface_hub.utils import validate_repo_id

from transformer.checkpoint.format import CheckpointError

__all__ = ["ALLOWED_PATTERNS", "NEVER_PATTERNS", "cache_dir", "download_patterns",
           "is_hub_name", "is_offline", "resolve"]

# The files the Hugging Face families read (their FOLDER_FILES) and those a model's repository
# names them by; fnmatch patterns over paths in the repository, as snapshot_download takes them.
ALLOWED_PATTERNS = (
    "config.json", "generation_config.json",
    "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "vocab.txt",
    "spiece.model", "sentencepiece.bpe.model", "source.spm", "target.spm",
)
TF_WEIGHTS = "tf_model.h5"  # fetched only from a repository without safetensors weights
SAFETENSORS_WEIGHTS = ("model.safetensors", "model.safetensors.index.json",
                       "model-*-of-*.safetensors")
# Never fetched, whatever ALLOWED_PATTERNS says: pickles (they run code when loaded) and the other
# frameworks' weights.
NEVER_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle", "*.msgpack", "*.onnx")
PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*-of-*.bin")
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", TF_WEIGHTS)  # one of these: whole
NAME_RULE = ('"name" or "org/name": letters, digits, \'-\', \'_\' and \'.\', at most 96 '
             'characters')
POLL_SECONDS = 0.2  # how often a download's progress is reported to the callback


def is_hub_name(text) -> bool:
    """Whether text is a valid Hugging Face repository name, "name" or "org/name"
    (huggingface_hub's validate_repo_id: no "..", no "--", no spaces, no leading "/")."""
    if not isinstance(text, str) or not text:
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def cache_dir() -> Path:
    """The hub cache huggingface_hub uses, read from the environment at each call with the
    precedence huggingface_hub.constants applies when it is imported: HF_HUB_CACHE, then
    HUGGINGFACE_HUB_CACHE, then HF_HOME/hub, then XDG_CACHE_HOME/huggingface/hub, then
    ~/.cache/huggingface/hub."""
    home = os.path.expandvars(os.path.expanduser(os.getenv(
        "HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache")),
                                "huggingface"))))
    hub = os.getenv("HF_HUB_CACHE", os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub")))
    return Path(os.path.expandvars(os.path.expanduser(hub)))


def is_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) set now, or when huggingface_hub was imported."""
    value = os.getenv("HF_HUB_OFFLINE") or os.getenv("TRANSFORMERS_OFFLINE") or ""
    return constants.is_offline_mode() or value.upper() in constants.ENV_VARS_TRUE_VALUES


def download_patterns(repo_files) -> tuple[str, ...]:
    """The patterns to fetch from a repository holding repo_files (its paths): ALLOWED_PATTERNS,
    and tf_model.h5 when it holds no safetensors weights."""
    if _matches(repo_files, SAFETENSORS_WEIGHTS):
        return ALLOWED_PATTERNS
    return (*ALLOWED_PATTERNS, TF_WEIGHTS)


def resolve(name_or_dir, *, progress=None) -> Path:
    """The local folder holding the model name_or_dir names: an existing folder as it is (~
    expanded); a Hugging Face repository name ("org/name", "name") from the hub cache, where it
    is found without the network, else downloaded into that cache (only the files that
    download_patterns allows). progress(fraction, text), when given, is called from this thread
    while a download runs (fraction in [0, 1]); huggingface_hub's own bars show besides.
    Raises a CheckpointError on any failure."""
    text = str(name_or_dir).strip()
    if not text:
        raise CheckpointError(f"Give a model's folder or its Hugging Face name ({NAME_RULE}).")
    path = Path(text).expanduser()
    try:
        if path.is_dir():
            return path
        is_file = path.exists()
    except OSError as err:
        raise CheckpointError(f"{text!r} could not be read "
                              f"({err.strerror or type(err).__name__}).") from None
    if is_file:
        raise CheckpointError(f"{text!r} is a file, not a folder: give the model's folder or "
                              f"its Hugging Face name ({NAME_RULE}).")
    if not is_hub_name(text):
        raise CheckpointError(f"{text!r} is neither a folder here nor a Hugging Face model name "
                              f"({NAME_RULE}).")
    return _from_hub(text, progress)


# ------------------------------------------------------------------ the hub
def _from_hub(name: str, progress) -> Path:
    cache = cache_dir()
    offline = is_offline()
    cached, partly = _cached(name, cache)
    if cached is not None and (offline or _holds(cached, WEIGHTS)):
        return cached
    where = f"{'only partly' if partly else 'not'} in the Hugging Face cache ({cache})"
    if offline:
        raise CheckpointError(_unreachable(name, where, "HF_HUB_OFFLINE is set"))
    try:
        info = HfApi().model_info(name, files_metadata=False)
    except Exception as err:  # noqa: BLE001 - every failure of the hub's client, as an error message
        raise CheckpointError(_download_failed(name, where, cache, err)) from None
    repo_files = [sibling.rfilename for sibling in info.siblings or ()]
    _check_weights(name, repo_files)
    patterns = download_patterns(repo_files)

    def download(tqdm_class):
        try:
            return snapshot_download(name, cache_dir=cache, allow_patterns=list(patterns),
                                     ignore_patterns=list(NEVER_PATTERNS), tqdm_class=tqdm_class)
        except Exception as err:  # noqa: BLE001 - as above; progress's own errors pass untouched
            raise CheckpointError(_download_failed(name, where, cache, err)) from None

    if progress is not None:
        progress(0.0, f"Downloading {name} from the Hugging Face Hub")
    folder = _reporting(download, name, progress)
    folder = Path(folder)
    if not _holds(folder, ("config.json",)):
        raise CheckpointError(f"{name} on the Hugging Face Hub holds no config.json: it is not "
                              "a model of a Hugging Face family read here.")
    if progress is not None:
        progress(1.0, f"Downloaded {name}")
    return folder


def _cached(name: str, cache: Path) -> tuple[Path | None, bool]:
    """(The cached snapshot of name's main revision holding config.json, or None; whether a
    snapshot is there but misses files that the cached file listing names.) No network."""
    try:
        folder = Path(snapshot_download(name, cache_dir=cache, allow_patterns=list(ALLOWED_PATTERNS),
                                        local_files_only=True))
    except IncompleteSnapshotError:
        return None, True
    except LocalEntryNotFoundError:
        return None, False
    except OSError as err:
        raise CheckpointError(f"The Hugging Face cache ({cache}) could not be read "
                              f"({err.strerror or type(err).__name__}).") from None
    if _holds(folder, ("config.json",)):
        return folder, False
    return None, True


def _holds(folder: Path, names) -> bool:
    try:
        return any((folder / name).is_file() for name in names)
    except OSError:
        return False


def _matches(paths, patterns) -> bool:
    return any(fnmatch(path, pattern) for path in paths for pattern in patterns)


def _check_weights(name: str, repo_files) -> None:
    """A sentence, before any download, when the repository's weights are only a pickle."""
    if _matches(repo_files, (*SAFETENSORS_WEIGHTS, TF_WEIGHTS)):
        return
    if _matches(repo_files, PICKLE_WEIGHTS):
        raise CheckpointError(
            f"{name} on the Hugging Face Hub holds its weights only as a PyTorch pickle "
            "(pytorch_model.bin), which is never read here (loading a pickle can run code): "
            "open a version of it with model.safetensors.")


def _unreachable(name: str, where: str, why: str) -> str:
    return (f"{name} is {where} and {why}: download it with `hf download {name}` on a machine "
            "with internet, or give its folder.")


def _download_failed(name: str, where: str, cache: Path, err: Exception) -> str:
    """The sentence for a failure of model_info or snapshot_download (subclasses first)."""
    if isinstance(err, GatedRepoError):
        return (f"{name} is gated on the Hugging Face Hub: accept its conditions on "
                f"https://huggingface.co/{name} and log in with `hf auth login`, or give the "
                "folder of a copy.")
    if isinstance(err, RepositoryNotFoundError):
        return (f"There is no model {name} on the Hugging Face Hub, or it is private and no "
                "token with access to it is set (`hf auth login`): check the name, or give "
                "the model's folder.")
    if isinstance(err, DisabledRepoError):
        return f"{name} has been disabled on the Hugging Face Hub: give the folder of a copy."
    if isinstance(err, RevisionNotFoundError):
        return f"{name} on the Hugging Face Hub has no main branch: give the model's folder."
    if isinstance(err, HfHubHTTPError):
        status = getattr(err.response, "status_code", None)
        if status in (401, 403):
            return (f"The Hugging Face Hub refused access to {name} (HTTP {status}): it is "
                    "private or gated; log in with `hf auth login`, or give the model's folder.")
        return _unreachable(name, where, f"the hub answered HTTP {status}")
    if isinstance(err, OfflineModeIsEnabled):
        return _unreachable(name, where, "HF_HUB_OFFLINE is set")
    if isinstance(err, (LocalEntryNotFoundError, HTTPError, XetDownloadError, ConnectionError,
                        TimeoutError)):
        return _unreachable(name, where, "the hub cannot be reached")
    if isinstance(err, OSError):
        return (f"{name} could not be written into the Hugging Face cache ({cache}): "
                f"{err.strerror or type(err).__name__}.")
    return f"Downloading {name} from the Hugging Face Hub failed ({type(err).__name__}: {err})."


# ------------------------------------------------------------------ progress
def _reporting(download, name: str, progress):
    """download(tqdm_class) run with huggingface_hub's bars, and progress(fraction, text) called
    from this thread every POLL_SECONDS while it runs (the download runs in a worker thread;
    huggingface_hub updates its bars from its own threads, where a UI cannot be drawn)."""
    if progress is None:
        return download(None)
    tally = _Tally()
    pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-download")
    try:
        future = pool.submit(download, tally.bar_class())
        while not futures.wait([future], timeout=POLL_SECONDS).done:
            progress(*tally.report(name))
        return future.result()
    finally:
        pool.shutdown(wait=False)  # a callback that raised leaves the download to finish alone


class _Tally:
    """The bytes and files a snapshot_download has fetched, counted by the bars it makes of the
    class bar_class() returns: huggingface_hub's tqdm (it shows as usual) that also counts. The
    byte bar is the one named "huggingface_hub.snapshot_download" (its total grows as each file
    starts); the file bar is hf_thread_map's, whose description starts with "Fetching"."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bytes_bar = self.files_bar = None
        self.done_bytes = self.done_files = 0
        self.fraction = 0.0

    def bar_class(self):
        tally = self

        class Bar(hf_tqdm):
            def __init__(self, *args, **kwargs):
                role = ("bytes" if kwargs.get("name") == "huggingface_hub.snapshot_download"
                        else "files" if str(kwargs.get("desc", "")).startswith("Fetching")
                        else None)
                super().__init__(*args, **kwargs)
                with tally.lock:
                    if role == "bytes":
                        tally.bytes_bar = self
                    elif role == "files":
                        tally.files_bar = self

            def update(self, n=1):
                with tally.lock:  # counted here: a disabled tqdm (no terminal) counts nothing
                    if self is tally.bytes_bar:
                        tally.done_bytes += n or 0
                    elif self is tally.files_bar:
                        tally.done_files += n or 0
                return super().update(n)

        return Bar

    def report(self, name: str) -> tuple[float, str]:
        """(fraction, text) so far: the bytes fetched of those known (each file's size is known
        once it starts), below 1 while a file is left, and never less than the last report."""
        with self.lock:
            total_bytes = getattr(self.bytes_bar, "total", None) or 0
            total_files = getattr(self.files_bar, "total", None) or 0
            done_bytes, done_files = self.done_bytes, self.done_files
        if total_bytes:
            fraction = done_bytes / total_bytes
        else:
            fraction = done_files / total_files if total_files else 0.0
        if done_files < total_files:
            fraction = min(fraction, 0.99)
        self.fraction = max(self.fraction, min(max(fraction, 0.0), 1.0))
        text = f"Downloading {name}"
        if total_bytes:
            text += f": {done_bytes / 1e6:.1f} of {total_bytes / 1e6:.1f} MB"
        if total_files:
            text += f" ({done_files} of {total_files} files)"
        return self.fraction, text
