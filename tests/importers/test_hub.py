"""A model's folder or its Hugging Face name turned into a local folder (transformer.importers.hf.hub).

The hub is never reached: a hub cache is laid out in tmp_path exactly as huggingface_hub lays it out
(testkit.hub_cache.lay_out_cache: models--org--name/blobs/<sha256>, snapshots/<commit>/<file> as
relative links to the blobs, refs/main holding the commit), holding the tiny BART of
tests/fixtures/bart/, and found with HF_HUB_OFFLINE=1. Downloads run against a fake hub on 127.0.0.1
(FakeHub: the few routes huggingface_hub 2.4 calls), so that what is fetched, and what never is, is
huggingface_hub's own behaviour with our patterns.
"""

import hashlib
import json
import os
import threading
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import constants

from testkit.hub_cache import COMMIT, lay_out_cache
from transformer.checkpoint.format import CheckpointError
from transformer.importers import HF_FILES, hf_family
from transformer.importers.hf import bart, hub
from transformer.importers.hf.hub import (
    ALLOWED_PATTERNS,
    NEVER_PATTERNS,
    cache_dir,
    download_patterns,
    is_hub_name,
    resolve,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bart"
BART_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
              "tokenizer_config.json", "vocab.json", "merges.txt")
REPO = "org/tiny-bart"


def bart_files() -> dict[str, bytes]:
    return {name: (FIXTURE / name).read_bytes() for name in BART_FILES}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty hub cache named by HF_HUB_CACHE, offline (the environment and huggingface_hub's
    constants, read when it was imported, both say so)."""
    folder = tmp_path / "hub-cache"
    for name in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return folder


# ------------------------------------------------------------------ names and folders
@pytest.mark.parametrize("text", ["t5-small", "org/name", "Helsinki-NLP/opus-mt-en-de",
                                  "facebook/bart-large-cnn", "a.b_c-d/e.f"])
def test_hub_names(text):
    assert is_hub_name(text)


@pytest.mark.parametrize("text", ["", "../etc", "a b", "/abs/path", "org/name/extra", "~/x",
                                  "org--x/name", "./name", "name.", "x" * 97, None])
def test_not_hub_names(text):
    assert not is_hub_name(text)


def test_an_existing_folder_is_returned_as_it_is(cache):
    assert resolve(str(FIXTURE)) == FIXTURE
    assert resolve(FIXTURE) == FIXTURE


def test_a_folder_under_home_is_expanded(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "models" / "mine").mkdir(parents=True)
    assert resolve("~/models/mine") == tmp_path / "models" / "mine"


def test_a_relative_folder_wins_over_a_hub_name(cache, tmp_path, monkeypatch):
    lay_out_cache(cache, REPO, bart_files())
    (tmp_path / "org" / "tiny-bart").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve(REPO) == Path(REPO)


@pytest.mark.parametrize("text", ["../etc", "a b", "/no/such/folder", "org/name/extra",
                                  "~/no/such/folder"])
def test_neither_a_folder_nor_a_name_is_a_sentence(cache, text):
    with pytest.raises(CheckpointError, match="is neither a folder here nor a Hugging Face model "
                                              "name"):
        resolve(text)


def test_an_empty_text_is_a_sentence(cache):
    with pytest.raises(CheckpointError, match="Give a model's folder or its Hugging Face name"):
        resolve("  ")


def test_a_file_is_not_a_folder(cache, tmp_path):
    (tmp_path / "model.zip").write_bytes(b"PK")
    with pytest.raises(CheckpointError, match="is a file, not a folder"):
        resolve(tmp_path / "model.zip")


# ------------------------------------------------------------------ the cache
def test_a_cached_model_is_found_offline(cache):
    snapshot = lay_out_cache(cache, REPO, bart_files())
    folder = resolve(REPO)
    assert folder == snapshot.resolve()
    assert (folder / "config.json").is_symlink() and (folder / "config.json").is_file()


def test_a_cache_of_files_on_disk_links_them(cache, tmp_path):
    folder = tmp_path / "tiny-bart"  # as bench/real_models.py --hub lays out its folders
    folder.mkdir()
    for name, data in bart_files().items():
        (folder / name).write_bytes(data)
    snapshot = lay_out_cache(cache, REPO, {p.name: p for p in folder.iterdir()})
    assert resolve(REPO) == snapshot.resolve()
    blob = (snapshot / "model.safetensors").resolve()
    assert blob.parent.name == "blobs" and os.path.samefile(blob, folder / "model.safetensors")


def test_the_cached_folder_opens_as_the_model(cache):
    lay_out_cache(cache, REPO, bart_files())
    folder = resolve(REPO)
    assert hf_family(folder) is bart.FAMILY
    assert hf_family(folder).convert(folder).config == bart.FAMILY.convert(FIXTURE).config


def test_hf_home_names_the_cache(cache, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / "hub"
    snapshot = lay_out_cache(tmp_path / "home" / "hub", "solo", bart_files())
    assert resolve("solo") == snapshot.resolve()


def test_hf_hub_cache_wins_over_hf_home(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert cache_dir() == cache


def test_a_name_not_in_the_cache_while_offline(cache):
    lay_out_cache(cache, REPO, bart_files())
    with pytest.raises(CheckpointError) as err:
        resolve("org/absent")
    assert str(err.value) == (
        f"org/absent is not in the Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set: "
        "download it with `hf download org/absent` on a machine with internet, or give its "
        "folder.")


def test_a_snapshot_without_config_json_is_partly_cached(cache):
    lay_out_cache(cache, REPO, {"README.md": b"# tiny"})
    with pytest.raises(CheckpointError, match=r"is only partly in the Hugging Face cache .* "
                                              "HF_HUB_OFFLINE is set"):
        resolve(REPO)


# ------------------------------------------------------------------ what is fetched
def test_allowed_patterns_never_take_a_pickle():
    def allowed(name, patterns=ALLOWED_PATTERNS):
        return (any(fnmatch(name, p) for p in patterns)
                and not any(fnmatch(name, p) for p in NEVER_PATTERNS))

    for name in ("pytorch_model.bin", "pytorch_model-00001-of-00002.bin", "training_args.bin",
                 "model.pt", "model.pth", "model.ckpt", "flax_model.msgpack", "model.onnx",
                 "onnx/encoder_model.onnx", "onnx/config.json", "README.md", "tf_model.h5",
                 "rust_model.ot"):
        assert not allowed(name), name
    for name in ("config.json", "model.safetensors", "model-00001-of-00002.safetensors",
                 "model.safetensors.index.json", "tokenizer.json", "source.spm", "spiece.model"):
        assert allowed(name), name


def test_the_patterns_cover_every_file_a_family_reads():
    every = download_patterns([])  # a repository without safetensors: tf_model.h5 too
    for name in HF_FILES:
        assert any(fnmatch(name, pattern) for pattern in every), name


def test_tf_weights_only_without_safetensors():
    assert "tf_model.h5" not in download_patterns(["config.json", "model.safetensors",
                                                   "tf_model.h5"])
    assert "tf_model.h5" not in download_patterns(["model-00001-of-00002.safetensors"])
    assert "tf_model.h5" in download_patterns(["config.json", "tf_model.h5",
                                               "pytorch_model.bin"])


# ------------------------------------------------------------------ downloads from a fake hub
class FakeHub:
    """The routes huggingface_hub 2.4's model_info and snapshot_download call, for the
    repositories in self.repos ({repo: {path: bytes}}); self.errors: {repo: (status,
    X-Error-Code)}; self.fetched: the paths whose bytes were sent."""

    def __init__(self):
        self.repos, self.errors, self.fetched = {}, {}, []
        hub_ = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub_.answer(self, body=False)

            def do_GET(self):
                hub_.answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, request, body):
        path = request.path.split("?")[0]
        api = path.startswith("/api/models/")
        parts = path.removeprefix("/api/models/").strip("/").split("/")
        repo = "/".join(parts[:2])
        if repo in self.errors:
            status, code = self.errors[repo]
            return self.send(request, status, b"{}", {"X-Error-Code": code}, body)
        if repo not in self.repos:
            return self.send(request, 404, b"{}", {"X-Error-Code": "RepoNotFound"}, body)
        files = self.repos[repo]
        if api and len(parts) >= 4 and parts[2] == "tree":
            listing = [{"type": "file", "path": name, "size": len(data),
                        "oid": hashlib.sha1(data).hexdigest()} for name, data in files.items()]
            return self.send(request, 200, json.dumps(listing).encode(), {}, body)
        if api:
            info = {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in files]}
            return self.send(request, 200, json.dumps(info).encode(), {}, body)
        name = "/".join(parts[4:])  # /org/name/resolve/<commit>/<path>
        if name not in files:
            return self.send(request, 404, b"", {"X-Error-Code": "EntryNotFound"}, body)
        data = files[name]
        if body:
            self.fetched.append(name)
        return self.send(request, 200, data, {"X-Repo-Commit": COMMIT,
                                              "ETag": f'"{hashlib.sha256(data).hexdigest()}"'},
                         body)

    @staticmethod
    def send(request, status, data, headers, body):
        request.send_response(status)
        for key, value in {"Content-Length": str(len(data)), **headers}.items():
            request.send_header(key, value)
        request.end_headers()
        if body:
            request.wfile.write(data)


@pytest.fixture
def fake_hub(cache, monkeypatch):
    """A FakeHub that huggingface_hub talks to, online."""
    fake = FakeHub()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        fake.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def test_a_download_fetches_only_what_the_families_read(fake_hub, cache, monkeypatch):
    fake_hub.repos[REPO] = {**bart_files(), "pytorch_model.bin": b"pickle", "tf_model.h5": b"h5",
                            "onnx/model.onnx": b"onnx", "README.md": b"# tiny",
                            "training_args.bin": b"pickle"}
    reports = []
    folder = resolve(REPO, progress=lambda fraction, text: reports.append((fraction, text)))
    assert sorted(fake_hub.fetched) == sorted(BART_FILES)
    assert folder == (cache / "models--org--tiny-bart" / "snapshots" / COMMIT).resolve()
    assert sorted(p.name for p in folder.iterdir()) == sorted(BART_FILES)
    assert reports[0] == (0.0, f"Downloading {REPO} from the Hugging Face Hub")
    assert reports[-1] == (1.0, f"Downloaded {REPO}")
    assert all(0.0 <= fraction <= 1.0 for fraction, _ in reports)
    assert hf_family(folder).convert(folder).config == bart.FAMILY.convert(FIXTURE).config

    fake_hub.fetched.clear()  # found in the cache now, offline or not, and nothing fetched
    assert resolve(REPO) == folder and fake_hub.fetched == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve(REPO) == folder


def test_progress_counts_the_files_and_bytes(fake_hub, monkeypatch):
    fake_hub.repos[REPO] = bart_files()
    monkeypatch.setattr(hub, "POLL_SECONDS", 0.001)
    slow = fake_hub.send

    def send_slowly(request, status, data, headers, body):
        if body and request.path.endswith("/model.safetensors"):
            threading.Event().wait(0.3)
        return slow(request, status, data, headers, body)

    monkeypatch.setattr(fake_hub, "send", send_slowly)
    reports = []
    resolve(REPO, progress=lambda fraction, text: reports.append((fraction, text)))
    *running, last = reports
    assert last == (1.0, f"Downloaded {REPO}")
    waiting = [fraction for fraction, text in running  # model.safetensors, held back, is left
               if text.startswith(f"Downloading {REPO}: ") and text.endswith(" MB (6 of 7 files)")]
    assert waiting and all(0.0 < fraction < 1.0 for fraction in waiting)
    fractions = [fraction for fraction, _ in running]
    assert fractions == sorted(fractions) and fractions[-1] <= 1.0


def test_tf_weights_are_fetched_only_without_safetensors(fake_hub):
    files = {name: data for name, data in bart_files().items() if name != "model.safetensors"}
    fake_hub.repos[REPO] = {**files, "tf_model.h5": b"h5", "pytorch_model.bin": b"pickle"}
    folder = resolve(REPO)
    assert (folder / "tf_model.h5").read_bytes() == b"h5"
    assert "pytorch_model.bin" not in fake_hub.fetched


def test_pickle_only_weights_are_refused_before_any_download(fake_hub):
    fake_hub.repos[REPO] = {"config.json": b"{}", "pytorch_model.bin": b"pickle"}
    with pytest.raises(CheckpointError, match="holds its weights only as a PyTorch pickle"):
        resolve(REPO)
    assert fake_hub.fetched == []


def test_a_repository_without_config_json(fake_hub):
    fake_hub.repos[REPO] = {"model.safetensors": b"{}", "README.md": b"# x"}
    with pytest.raises(CheckpointError, match="holds no config.json"):
        resolve(REPO)


def test_a_missing_repository(fake_hub):
    with pytest.raises(CheckpointError, match="There is no model org/absent on the Hugging Face "
                                              "Hub, or it is private"):
        resolve("org/absent")


def test_a_gated_repository(fake_hub):
    fake_hub.errors[REPO] = (403, "GatedRepo")
    with pytest.raises(CheckpointError, match=f"{REPO} is gated on the Hugging Face Hub: accept "
                                              "its conditions"):
        resolve(REPO)


def test_a_hub_that_fails(fake_hub):
    fake_hub.errors[REPO] = (500, "")
    with pytest.raises(CheckpointError, match=r"is not in the Hugging Face cache .* and the hub "
                                              "answered HTTP 500: download it with"):
        resolve(REPO)


def test_a_hub_that_cannot_be_reached(fake_hub, monkeypatch):
    fake_hub.server.shutdown()
    fake_hub.server.server_close()  # nothing listens on its port now
    with pytest.raises(CheckpointError, match=r"is not in the Hugging Face cache .* and the hub "
                                              "cannot be reached: download it with `hf download "
                                              f"{REPO}`"):
        resolve(REPO)
