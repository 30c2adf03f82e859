"""The Python environment a job will run in: interpreter, conda/venv, packages, torch.

Nothing here imports the packages it asks about: versions come from the
installed distributions' metadata, importability from
``importlib.util.find_spec`` (which locates a top-level module without
running it), and torch's CUDA version from the text of ``torch/version.py``.

Versions are read from the ``NAME-VERSION.dist-info`` / ``.egg-info`` folder
names on sys.path, the records ``importlib.metadata`` reads, in the same
order; ``importlib.metadata`` itself (slow to import) is asked only about an
importable package whose folder was not found that way.

This file is also run as a script by *another* interpreter (``preflight check
--python PATH``), so it uses only the standard library, keeps to syntax that
Python 3.6 accepts, and never imports preflight::

    /path/to/python interpreter_script.py '{"packages": [{"name": "torch", "import": "torch", "dists": ["torch"]}]}'

prints the facts as one JSON line.
"""

import ast
import glob
import importlib.machinery
import importlib.util
import json
import os
import sys


def probe(packages, environ=None):
    """Facts about the running interpreter; ``packages`` is a list of package specs."""
    environ = os.environ if environ is None else environ
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "venv": getattr(sys, "base_prefix", sys.prefix) != sys.prefix,
        "conda": _conda(environ),
        "packages": _packages(packages),
        "torch": _torch(),
        "torch_companions": _companions(),
    }


def _conda(environ):
    prefix = sys.prefix
    env_prefix = environ.get("CONDA_PREFIX") or None
    env_name = environ.get("CONDA_DEFAULT_ENV") or None
    interpreter_is_conda = os.path.isdir(os.path.join(prefix, "conda-meta"))
    facts = {
        "active": interpreter_is_conda or bool(env_prefix),
        "env_name": None,
        "is_base": None,
        "prefix": None,
        "source": None,
        "CONDA_DEFAULT_ENV": env_name,
        "CONDA_PREFIX": env_prefix,
        "interpreter_in_active_env": None,
    }
    if interpreter_is_conda:
        # The interpreter's own environment decides where packages come from.
        is_base = os.path.isdir(os.path.join(prefix, "condabin"))
        facts.update(prefix=prefix, source="interpreter", is_base=is_base,
                     env_name="base" if is_base else os.path.basename(prefix.rstrip("/\\")))
    elif env_prefix:
        name = env_name or os.path.basename(env_prefix.rstrip("/\\"))
        if "/" in name or "\\" in name:  # environments created with -p are named by path
            name = os.path.basename(name.rstrip("/\\"))
        facts.update(prefix=env_prefix, source="environment", env_name=name,
                     is_base=name == "base" or os.path.isdir(os.path.join(env_prefix, "condabin")))
    if env_prefix:
        facts["interpreter_in_active_env"] = _same_path(prefix, env_prefix)
    return facts


def _same_path(a, b):
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return a == b


def _packages(specs):
    index = _installed_versions() if specs else {}
    return dict((spec["name"], _package(spec, index)) for spec in specs)


def _package(spec, index=None):
    import_name = spec.get("import")
    importable = _importable(import_name) if import_name else None  # None: a distribution, found by its metadata
    index = _installed_versions() if index is None else index
    dists = spec.get("dists") or [spec["name"]]
    version, dist = None, None
    for candidate in dists:
        version = index.get(_normalise(candidate))
        if version is not None:
            dist = candidate
            break
    if version is None and importable is not False:
        for candidate in dists:
            version = _metadata_version(candidate)
            if version is not None:
                dist = candidate
                break
    return {"dist": dist, "version": version, "import": import_name, "importable": importable}


def _importable(name):
    """Whether ``import name`` would find a module, without importing anything.

    ``importlib.util.find_spec("a.b")`` imports the package ``a`` first (and
    runs its code); here each level is located on the search path of the one
    above it instead. Names that are not dotted identifiers are never looked up.
    """
    parts = name.split(".")
    if not all(_identifier(part) for part in parts):
        return False
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name is located, not run
        for depth in range(1, len(parts)):
            locations = spec.submodule_search_locations if spec is not None else None
            if not locations:
                return False
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth + 1]), list(locations))
        return spec is not None
    except (ImportError, ValueError, AttributeError):
        return False


def _identifier(word):
    return bool(word) and word.isidentifier() and all(ord(c) < 128 for c in word)


def _metadata_version(name):
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        try:
            import importlib_metadata as metadata
        except ImportError:
            return None
    try:
        return metadata.version(name)
    except Exception:  # PackageNotFoundError, or a broken distribution
        return None


def _normalise(name):
    return name.lower().replace("-", "_").replace(".", "_")


def _installed_versions():
    """Normalised distribution name -> version, from the metadata folders on sys.path (first one wins)."""
    versions = {}
    for folder in sys.path:
        for entry in _listdir(folder or "."):
            if not entry.endswith((".dist-info", ".egg-info")):  # most entries: checked before any other work
                continue
            base = entry.rsplit(".", 1)[0]
            if "-" in base:
                dist, version = base.split("-", 1)
                versions.setdefault(_normalise(dist), version.split("-")[0])
    return versions


def _listdir(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _torch():
    """What torch is installed and which CUDA it was built for, without importing it."""
    location = None
    try:
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.submodule_search_locations:
            location = list(spec.submodule_search_locations)[0]
    except (ImportError, ValueError, AttributeError):
        location = None
    if location is None:
        return {"installed": False}
    facts = {"installed": True, "location": location, "version": None, "cuda": None, "hip": None,
             "extension": None, "error": None}
    try:
        with open(os.path.join(location, "version.py"), encoding="utf-8") as handle:
            values = _literal_assignments(handle.read())
        facts["version"] = values.get("__version__")
        facts["cuda"] = values.get("cuda")
        facts["hip"] = values.get("hip")
    except (OSError, SyntaxError, ValueError) as exc:
        facts["error"] = "cannot read torch/version.py: %s" % exc
    extensions = sorted(glob.glob(os.path.join(location, "_C.*.so")) + glob.glob(os.path.join(location, "_C.*.pyd")))
    if extensions:
        stat = os.stat(extensions[0])
        facts["extension"] = {"path": extensions[0], "size": stat.st_size, "mtime_ns": int(stat.st_mtime * 1e9)}
    return facts


COMPANIONS = ("torchvision", "torchaudio")  # built for one torch release and build each: checked as a pair with it


def _companions():
    """torchvision's and torchaudio's build, read from their files without importing them: the version (its local
    part names the build: +cu130, +cpu) from version.py, and the torch their metadata requires."""
    found = {}
    for name in COMPANIONS:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        location = list(spec.submodule_search_locations)[0]
        facts = {"version": None, "requires_torch": None, "error": None}
        try:
            with open(os.path.join(location, "version.py"), encoding="utf-8") as handle:
                facts["version"] = _literal_assignments(handle.read()).get("__version__")
        except (OSError, SyntaxError, ValueError) as exc:
            facts["error"] = "cannot read %s/version.py: %s" % (name, exc)
        facts["requires_torch"] = _requires_torch(os.path.dirname(location), name)
        found[name] = facts
    return found


def _requires_torch(folder, name):
    """The torch requirement in the METADATA of ``name``'s dist-info beside its package ("==2.13.0"), or None."""
    for entry in _listdir(folder):
        if not (entry.endswith(".dist-info") and _normalise(entry.split("-")[0]) == _normalise(name)):
            continue
        try:
            with open(os.path.join(folder, entry, "METADATA"), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        return None  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    requirement = value.split(";")[0].replace("(", " ").replace(")", " ").strip()
                    if key.strip().lower() == "requires-dist" and _requirement_name(requirement) == "torch":
                        return requirement[len("torch"):].replace(" ", "") or None
        except OSError:
            return None
    return None


def _requirement_name(requirement):
    """The distribution a Requires-Dist line names: the text before its first version operator or space."""
    end = len(requirement)
    for mark in " <>=!~[":
        if mark in requirement:
            end = min(end, requirement.index(mark))
    return requirement[:end].lower()


def _literal_assignments(source):
    """Top-level ``name = <literal>`` (and annotated) assignments; nothing is executed."""
    values = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, getattr(ast, "AnnAssign", ())) and isinstance(node.target, ast.Name) and node.value:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError):
            continue
    return values


if __name__ == "__main__":
    request = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    sys.stdout.write(json.dumps(probe(request.get("packages", []))) + "\n")
