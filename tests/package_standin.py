"""A stand-in for PyPI and PyTorch's wheel indexes: small generated wheels, served over HTTPS at their real hosts.

Printed fixes name ``https://download.pytorch.org/whl/cu130`` and install from PyPI by default; the fix-loop test
runs them exactly as printed. pip reaches both through a proxy (``PIP_PROXY``) that answers ``CONNECT`` for
pypi.org, files.pythonhosted.org and download.pytorch.org itself, with a certificate from a throwaway CA
(``PIP_CERT``, made by trustme): the hosts are mapped here, nothing leaves the machine, and any other host is
refused.

What the indexes hold is read from preflight's own knowledge: PyPI's releases, Pythons and wheels from
rules/knowledge/package-index.json, the PyTorch indexes' torch lines and builds from
rules/knowledge/pytorch-wheels.toml, for the Pythons under test. The wheels are tiny: each installs its import
package (``cv2``, ``yaml``, ``PIL``, ...) with its version, and the requirements that make the field's traps real:
PyPI's torch is a CUDA build requiring NVIDIA runtime wheels, torchvision requires its torch exactly and numpy and
Pillow, thop requires torch, the OpenCV builds and the plotting packages require numpy. The stand-in torch answers
preflight's architecture question (``torch._C._cuda_getArchFlags()``) with its variant's architectures, and its
torchvision refuses to import beside a torch of another release or build, as the real ones do ("operator
torchvision::nms does not exist").
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import io
import json
import os
import ssl
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple
from urllib.parse import quote, unquote

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from preflight.knowledge import package_index, torch_wheels

PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org")
PYTORCH_HOST = "download.pytorch.org"
PLATFORM_TAG = "manylinux_2_17_x86_64"

# Import packages whose name is not the distribution's.
MODULES = {"pyyaml": "yaml", "pillow": "PIL", "opencv-python": "cv2", "opencv-python-headless": "cv2",
           "opencv-contrib-python": "cv2", "opencv-contrib-python-headless": "cv2", "ipython": "IPython",
           "nvidia-ml-py": "pynvml", "typing-extensions": "typing_extensions", "huggingface-hub": "huggingface_hub",
           "gitpython": "git", "scikit-learn": "sklearn"}
# Requirements of the stand-ins (the real packages' that matter here; torch's and torchvision's are computed).
REQUIRES = {"thop": ["torch"], "opencv-python": ["numpy"], "opencv-python-headless": ["numpy"],
            "opencv-contrib-python": ["numpy"], "opencv-contrib-python-headless": ["numpy"],
            "matplotlib": ["numpy", "pillow"], "pandas": ["numpy"], "seaborn": ["numpy", "pandas", "matplotlib"],
            "scipy": ["numpy"], "tensorboard": ["numpy"]}
# Projects the knowledge does not cover that YOLOv9's requirements.txt names: one release each, as on PyPI, with
# the requirement that matters (albumentations installs the headless OpenCV).
EXTRA = {"gitpython": ("3.1.45", []), "albumentations": ("2.0.8", ["numpy>=1.24.4", "opencv-python-headless>=4.9.0.80"]),
         "pycocotools": ("2.0.10", ["numpy"])}
CUDA_RUNTIME = "nvidia-cuda-runtime-cu%d"  # what a CUDA torch requires: a marker that a CUDA build came in


class Dist(NamedTuple):
    name: str  # canonical
    version: str  # with the local tag of a PyTorch index build
    pythons: Tuple[str, ...]  # "3.11", ... or ("py3",) for a pure wheel
    requires_python: Optional[str]
    requires: Tuple[str, ...]
    build: Optional[str] = None  # torch and companions: cpu, cu130, ...

    def filenames(self) -> List[str]:
        stem = "%s-%s" % (self.name.replace("-", "_"), self.version)
        if self.pythons == ("py3",):
            return ["%s-py3-none-any.whl" % stem]
        return ["%s-cp%s-cp%s-%s.whl" % (stem, p.replace(".", ""), p.replace(".", ""), PLATFORM_TAG)
                for p in self.pythons]


class Catalog:
    """What each index holds for ``pythons``."""

    def __init__(self, pythons: Sequence[str]) -> None:
        self.pythons = tuple(pythons)
        self.data = torch_wheels.catalog()

    def _wheel_pythons(self, record) -> Tuple[str, ...]:
        if record.get("pure"):
            return ("py3",)
        tags = (record.get("wheels") or {}).get("linux_x86_64") or []
        if "py3" in tags:
            return ("py3",)
        found = [p for p in self.pythons if p in tags or any(t.endswith("+") and Version(t[:-1]) <= Version(p)
                                                             for t in tags)]
        requires = record.get("requires_python")
        if requires:
            found = [p for p in found if SpecifierSet(requires).contains(p)]
        return tuple(found)

    @functools.lru_cache(maxsize=None)
    def pypi(self, name: str) -> List[Dist]:
        name = canonicalize_name(name)
        if name in EXTRA:
            version, requires = EXTRA[name]
            return [Dist(name, version, ("py3",), None, tuple(requires))]
        if name.startswith("nvidia-cuda-runtime-cu"):
            return [Dist(name, "%s.0.0" % name.rpartition("-cu")[2], ("py3",), None, ())]
        found = []
        for version, record in package_index.releases(name).items():
            pythons = self._wheel_pythons(record)
            if not pythons:
                continue
            requires = list(REQUIRES.get(name, []))
            build = None
            if name == "torch":
                cuda = self.data.releases.get(_line(version))
                build = "cu%d%d" % cuda.pypi_cuda if cuda and cuda.pypi_cuda else None
                requires = [CUDA_RUNTIME % cuda.pypi_cuda[0]] if cuda and cuda.pypi_cuda else []
            elif name in ("torchvision", "torchaudio"):
                requires = _companion_requires(name, record)
                torch_line = _torch_line(record)
                release = self.data.releases.get(torch_line) if torch_line else None
                build = "cu%d%d" % release.pypi_cuda if release and release.pypi_cuda else None
            found.append(Dist(name, version, pythons, record.get("requires_python"), tuple(requires), build))
        return found

    @functools.lru_cache(maxsize=None)
    def pytorch(self, tag: str, name: str) -> List[Dist]:
        """A PyTorch index's page: its torch builds, their companions, and the requirements it also serves."""
        name = canonicalize_name(name)
        if name in ("numpy", "pillow") or name.startswith("nvidia-"):
            return self.pypi(name)
        if name not in ("torch", "torchvision", "torchaudio"):
            return []
        lines = self._lines(tag)
        found = []
        for version, record in package_index.releases(name).items():
            line = _line(version) if name == "torch" else _torch_line(record)
            if line not in lines:
                continue
            pythons = self._wheel_pythons(record)
            if not pythons:
                continue
            if name == "torch":
                cuda = torch_wheels.nvidia.parse_major_minor(tag[2:-1] + "." + tag[-1]) if tag != "cpu" else None
                requires = [CUDA_RUNTIME % cuda[0]] if cuda else []
            else:
                requires = _companion_requires(name, record)
            found.append(Dist(name, "%s+%s" % (version, tag), pythons, record.get("requires_python"),
                              tuple(requires), tag))
        return found

    def _lines(self, tag: str):
        if tag == "cpu":
            return set(self.data.releases)
        return {line for variant in self.data.variants if variant.tag == tag for line in variant.releases}

    def archs(self, tag: str, version: str) -> str:
        """What the stand-in torch says it has kernels for: its variant's architectures (sm_XY), none on CPU."""
        for variant in self.data.variants:
            if variant.tag == tag:
                return " ".join("sm_%d%d" % cc for cc in variant.archs_for(_line(version)))
        return ""


def _line(version: str) -> Tuple[int, int]:
    release = Version(version.split("+")[0]).release
    return release[0], release[1]


def _torch_line(record) -> Optional[Tuple[int, int]]:
    required = record.get("requires_torch") or ""
    digits = required.lstrip("=<>!~ ").split(".")
    return (int(digits[0]), int(digits[1])) if len(digits) >= 2 and digits[1].isdigit() else None


def _companion_requires(name: str, record) -> List[str]:
    requires = ["torch%s" % (record.get("requires_torch") or "")]
    return requires + (["numpy", "pillow"] if name == "torchvision" else [])


# --- the wheels ------------------------------------------------------------------------------------------------

def wheel(dist: Dist, python_tag: str, catalog: Catalog) -> bytes:
    files = _modules(dist, catalog)
    info = "%s-%s.dist-info" % (dist.name.replace("-", "_"), dist.version)
    metadata = ["Metadata-Version: 2.1", "Name: %s" % dist.name, "Version: %s" % dist.version]
    if dist.requires_python:
        metadata.append("Requires-Python: %s" % dist.requires_python)
    metadata += ["Requires-Dist: %s" % requirement for requirement in dist.requires]
    files["%s/METADATA" % info] = "\n".join(metadata) + "\n\n"
    files["%s/WHEEL" % info] = "Wheel-Version: 1.0\nGenerator: preflight-tests\nRoot-Is-Purelib: %s\nTag: %s\n" % (
        "true" if python_tag == "py3-none-any" else "false", python_tag)
    record = ["%s,sha256=%s,%d" % (path, base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
                                   .rstrip(b"=").decode(), len(text.encode())) for path, text in files.items()]
    files["%s/RECORD" % info] = "\n".join(record + ["%s/RECORD,," % info]) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return buffer.getvalue()


def _modules(dist: Dist, catalog: Catalog) -> Dict[str, str]:
    public = dist.version.split("+")[0]
    if dist.name == "torch":
        cuda = None
        if dist.build and dist.build.startswith("cu"):
            cuda = "%s.%s" % (dist.build[2:-1], dist.build[-1])
        local = "%s+%s" % (public, dist.build) if dist.build else public
        return {
            "torch/__init__.py": "from torch import version, _C, cuda\n__version__ = version.__version__\n",
            "torch/version.py": "__version__ = %r\ncuda = %r\nhip = None\ngit_version = 'standin'\n" % (local, cuda),
            "torch/_C.py": "def _cuda_getArchFlags():\n    return %r\n" % catalog.archs(dist.build or "", public),
            "torch/cuda/__init__.py": "def is_available():\n    return False\n",
        }
    if dist.name in ("torchvision", "torchaudio"):
        local = "%s+%s" % (public, dist.build) if dist.build else public
        required = [r for r in dist.requires if r.startswith("torch")][0][len("torch"):]
        check = (
            "import torch\n"
            "def _build(version):\n"
            "    return version.partition('+')[2] or None\n"
            "_mine, _theirs = _build(%r), _build(torch.__version__)\n"
            "_cuda = lambda tag: (tag or '').startswith('cu')\n"
            "if _cuda(_mine) != _cuda(_theirs) or (_cuda(_mine) and _mine[:4] != _theirs[:4]):\n"
            "    raise RuntimeError('operator %s::nms does not exist')\n"
            "if not torch.__version__.split('+')[0].startswith(%r):\n"
            "    raise RuntimeError('%s requires torch%s, found ' + torch.__version__)\n"
            % (local, dist.name, required.lstrip("=<>~! ").rsplit(".", 1)[0] + ".", dist.name, required))
        return {"%s/__init__.py" % dist.name: check + "from %s.version import __version__\n" % dist.name,
                "%s/version.py" % dist.name: "__version__ = %r\ngit_version = 'standin'\n" % local}
    if dist.name == "setuptools":
        files = {"setuptools/__init__.py": "__version__ = %r\n" % public}
        if Version(public) < Version("82"):
            files["pkg_resources/__init__.py"] = "# pkg_resources, removed in setuptools 82\n"
        return files
    if dist.name == "nvidia-ml-py":
        return {"pynvml.py": "__version__ = %r\n" % public}
    if dist.name == "pynvml":
        return {"pynvml_utils/__init__.py": ""} if Version(public) >= Version("12") else \
            {"pynvml/__init__.py": "__version__ = %r\n" % public}
    if dist.name == "typing-extensions":
        return {"typing_extensions.py": "__version__ = %r\n" % public}
    module = MODULES.get(dist.name, dist.name.replace("-", "_"))
    return {"%s/__init__.py" % module: "__version__ = %r\n" % public}


# --- serving ---------------------------------------------------------------------------------------------------

class _Origin(BaseHTTPRequestHandler):
    """Requests inside a CONNECT tunnel, to one of the stood-in hosts."""

    protocol_version = "HTTP/1.1"

    def __init__(self, sock, address, server, host: str) -> None:
        self.host = host
        super().__init__(sock, address, server)

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        index: Index = self.server.index
        index.requests.append("https://%s%s" % (self.host, self.path))
        body, kind = index.answer(self.host, unquote(self.path.split("?")[0]))
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_CONNECT(self) -> None:
        host = self.path.rpartition(":")[0]
        if host not in PYPI_HOSTS + (PYTORCH_HOST,):
            self.server.index.refused.append(host)
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.close_connection = True
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        try:
            tunnel = self.server.tls.wrap_socket(self.connection, server_side=True)
            _Origin(tunnel, self.client_address, self.server, host)
        except (ssl.SSLError, OSError):
            pass
        self.close_connection = True

    def do_GET(self) -> None:  # plain HTTP: nothing here speaks it
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Index:
    """The stand-in, serving: ``env`` is what pip needs to reach it (and only it)."""

    def __init__(self, folder: Path, pythons: Sequence[str]) -> None:
        import trustme

        self.catalog = Catalog(pythons)
        self.requests: List[str] = []
        self.refused: List[str] = []
        self._wheels: Dict[str, bytes] = {}
        authority = trustme.CA()
        certificate = authority.issue_cert(*(PYPI_HOSTS + (PYTORCH_HOST,)))
        self.ca_file = folder / "standin-ca.pem"
        authority.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        certificate.configure_cert(context)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
        self.server.daemon_threads = True
        self.server.tls = context
        self.server.index = self
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def environment(self, base: Dict[str, str]) -> Dict[str, str]:
        """``base`` without what would send pip elsewhere (PIP_* settings, proxies, other CA bundles), with the
        stand-in's proxy and CA: pip then reaches PyPI's and PyTorch's hosts here, and nothing else."""
        env = {key: value for key, value in base.items() if not key.startswith("PIP_")
               and key.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
               and key not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")}
        ca = str(self.ca_file)
        env.update({"PIP_PROXY": "http://127.0.0.1:%d" % self.server.server_address[1], "PIP_CERT": ca,
                    "REQUESTS_CA_BUNDLE": ca, "SSL_CERT_FILE": ca, "PIP_CONFIG_FILE": os.devnull,
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "PIP_DEFAULT_TIMEOUT": "30",
                    "PIP_RETRIES": "0", "PIP_NO_INPUT": "1"})
        return env

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, host: str, path: str):
        parts = [p for p in path.split("/") if p]
        if host == "pypi.org" and len(parts) == 2 and parts[0] == "simple":
            return self._page(self.catalog.pypi(parts[1]), "https://files.pythonhosted.org/packages/")
        if host == "files.pythonhosted.org" and len(parts) == 2 and parts[0] == "packages":
            return self._file(parts[1], self.catalog.pypi)
        if host == PYTORCH_HOST and len(parts) == 3 and parts[0] == "whl" and parts[2].endswith(".whl"):
            return self._file(parts[2], functools.partial(self.catalog.pytorch, parts[1]))
        if host == PYTORCH_HOST and len(parts) == 3 and parts[0] == "whl":
            return self._page(self.catalog.pytorch(parts[1], parts[2]), "https://%s/whl/%s/" % (PYTORCH_HOST,
                                                                                               parts[1]))
        return None, ""

    def _page(self, dists: List[Dist], base: str):
        if not dists:
            return None, ""
        links = []
        for dist in dists:
            for filename in dist.filenames():
                requires = ' data-requires-python="%s"' % html.escape(dist.requires_python) \
                    if dist.requires_python else ""
                links.append('<a href="%s%s"%s>%s</a><br/>' % (base, quote(filename), requires, filename))
        body = "<!DOCTYPE html><html><body>\n%s\n</body></html>\n" % "\n".join(links)
        return body.encode(), "text/html"

    def _file(self, filename: str, lookup):
        if filename in self._wheels:
            return self._wheels[filename], "application/octet-stream"
        name = canonicalize_name(filename.split("-")[0])
        for dist in lookup(name):
            if filename in dist.filenames():
                tag = "-".join(filename[:-len(".whl")].split("-")[-3:])
                self._wheels[filename] = wheel(dist, tag, self.catalog)
                return self._wheels[filename], "application/octet-stream"
        return None, ""


def installed(python: str) -> Dict[str, str]:
    """The distributions in an interpreter's environment: canonical name -> version (``pip list``'s answer)."""
    import subprocess

    completed = subprocess.run([python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                               capture_output=True, text=True, timeout=120)
    return {canonicalize_name(entry["name"]): entry["version"] for entry in json.loads(completed.stdout or "[]")}
