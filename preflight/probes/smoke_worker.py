"""The active GPU test of ``preflight smoke``, run by the job's own interpreter with its torch.

Like interpreter_script.py this file is run as a script by *another* interpreter, so it uses only the standard
library and torch, keeps to syntax Python 3.8 accepts, and never imports preflight::

    /path/to/python smoke_worker.py '{"device": "cuda", "budget": 50, ...}'

prints one JSON line with what it measured. Every check catches its own failure and reports it as data (a GPU
that computes wrong results, a cuDNN error, a kernel missing for this GPU), and every check looks at the clock:
what the budget does not leave time for is reported as not run. preflight kills the whole process group at its
own deadline, so a hung kernel never hangs preflight. Nothing is written anywhere; GPU memory is given back.

What preflight reads is written to the standard output it was started with, and to nothing else: the worker
points its own file descriptor 1 at standard error, so whatever the checkout's code or a native library prints
cannot be taken for an answer. As each test starts and finishes a progress line says so with every result so
far, and while one runs a heartbeat says what it is doing every few seconds: preflight keeps the last results,
so whatever ends the worker (SIGKILL, the out-of-memory killer, a crash in native code, the deadline) loses only
the test that was running, and preflight knows which one that was.
"""

import copy
import json
import math
import os
import sys
import threading
import time
import traceback

MIB = 1 << 20
HEARTBEAT = 5.0  # seconds between two "still running" lines while one test runs
_channel = sys.stdout  # what preflight reads (main() moves it off file descriptor 1)
_channel_lock = threading.Lock()
_now = (None, None, "", 0.0)  # the test running: (test, device index, what it is doing, since when)


def main(argv):
    global _channel
    request = json.loads(argv[1])
    started = time.monotonic()
    budget = float(request.get("budget", 50))

    def left():
        return budget - (time.monotonic() - started)

    _channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # not inherited by what the checkout starts
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    beat = threading.Thread(target=_heartbeat, args=(left,), name="heartbeat")
    beat.daemon = True
    beat.start()

    report = {"python": sys.version.split()[0], "checks": {}, "devices": [], "errors": []}
    try:
        import torch
    except Exception as exc:  # torch missing or broken: said, not raised
        report["errors"].append("cannot import torch: %s" % _one_line(exc))
        return _emit(report)
    report["torch"] = torch.__version__
    report["torch_cuda"] = getattr(torch.version, "cuda", None)
    device_kind = request.get("device", "auto")
    if device_kind == "auto":  # a machine with an NVIDIA driver is tested on its GPUs, even if CUDA fails there
        device_kind = "cuda" if torch.cuda.is_available() or os.path.exists("/dev/nvidiactl") else "cpu"
    report["device"] = device_kind
    if device_kind == "cuda" and not torch.cuda.is_available():
        report["errors"].append("torch.cuda.is_available() is False: no GPU to test (torch %s, CUDA %s)"
                                % (torch.__version__, report["torch_cuda"]))
        return _emit(report)
    torch.manual_seed(0)
    indices = _indices(torch, device_kind, request.get("gpus"))
    if not indices:
        report["errors"].append("none of the GPUs asked for (--gpus %s) is visible to CUDA here, which sees %d"
                                % (",".join(str(i) for i in request.get("gpus") or []), torch.cuda.device_count()))
        return _emit(report)
    checks = request.get("checks") or ["memory", "matmul", "throughput", "train_step", "collective", "fit"]
    report["asked"] = [name for name in checks if name != "fit" or request.get("fit")]  # what a deadline may cut
    share = float(request.get("memory_share", 0.5))
    iterations = max(1, int(request.get("iterations", 1)))
    fit_budget = float((request.get("fit") or {}).get("budget") or 0)  # the measured fit's own time
    # The rest of the budget: the collective (and the fit when it has no budget of its own).
    per_device = max(1.0, (left() - fit_budget) * 0.6 / max(1, len(indices)))
    for index in indices:
        device = torch.device(device_kind, index) if device_kind == "cuda" else torch.device("cpu")
        entry = {"index": index, "device": str(device), "name": _name(torch, device)}
        if device.type == "cuda":
            entry["compute_capability"] = "%d.%d" % torch.cuda.get_device_capability(index)
        until = time.monotonic() + min(per_device, left())
        for name, run in (("memory", lambda: _memory(torch, device, share, until)),
                          ("matmul", lambda: _matmul(torch, device)),
                          ("throughput", lambda: _throughput(torch, device, until)),
                          ("train_step", lambda: _train_step(torch, device))):
            if name not in checks:
                continue
            if time.monotonic() >= until:
                entry[name] = {"skipped": "no time left in the %.0f s budget" % budget}
                continue
            _started(report, entry, name, index, left())
            for iteration in range(iterations):  # --iterations: the worst of the repetitions is kept
                if iteration and (time.monotonic() >= until or "error" in entry[name]):
                    break
                result = _guarded(run)
                entry[name] = result if not iteration else _worst(name, entry[name], result)
                entry[name]["iterations"] = iteration + 1
                _release(torch, device)
            _progress(report, entry, name, index, left())
        report["devices"].append(entry)
    if "collective" in checks:
        _started(report, None, "collective", None, left())
        report["checks"]["collective"] = (_guarded(lambda: _collective(torch, device_kind, indices,
                                                                        left() - fit_budget))
                                          if left() - fit_budget > 5 else {"skipped": "no time left in the budget"})
        _progress(report, None, "collective", None, left())
    if "fit" in checks and request.get("fit"):
        _started(report, None, "fit", None, left())
        report["checks"]["fit"] = (_guarded(lambda: _fit(torch, device_kind, indices, request["fit"], left()))
                                   if left() > 2 else {"skipped": "no time left in the budget"})
        _note_missing_module(report["checks"]["fit"], request["fit"])
        if "error" in report["checks"]["fit"]:
            report["checks"]["fit"]["repo"] = os.path.abspath(request["fit"]["repo"])  # the checkout's problem
        _progress(report, None, "fit", None, left())
    report["seconds"] = round(time.monotonic() - started, 2)
    return _emit(report)


def _worst(name, kept, new):
    """Two runs of one test, as one: an error wins; else the worse figure of each (memory errors added up, the
    larger precision error, the lower speed, a training step that failed)."""
    if "error" in new or "error" in kept:
        return new if "error" in new else kept
    if name == "memory":
        merged = dict(new)
        merged["errors"] = int(kept.get("errors", 0)) + int(new.get("errors", 0))
        merged["seconds"] = round(float(kept.get("seconds", 0)) + float(new.get("seconds", 0)), 3)
        return merged
    if name == "matmul":
        merged = dict(new)
        for precision, result in kept.items():
            other = new.get(precision)
            if isinstance(result, dict) and isinstance(other, dict) and result.get("supported"):
                worse = dict(other)
                worse["max_relative_error"] = max(result.get("max_relative_error") or 0.0,
                                                  other.get("max_relative_error") or 0.0)
                worse["finite"] = bool(result.get("finite", True)) and bool(other.get("finite", True))
                merged[precision] = worse
        return merged
    if name == "throughput":
        merged = dict(new)
        for key in ("matmul_tflops", "bandwidth_gbs"):
            if isinstance(kept.get(key), (int, float)) and isinstance(new.get(key), (int, float)):
                merged[key] = min(kept[key], new[key])
        return merged
    if name == "train_step":
        return kept if not kept.get("ok", True) else new
    return new


def _note_missing_module(result, fit):
    """A module the checkout's code imports and this interpreter lacks: its name, and the checkout's requirements
    file where it has one (what installs it; a module's name is not always its package's)."""
    if "error" not in result or not result["error"].startswith("ModuleNotFoundError"):
        return
    result["missing_module"] = result["error"].split("'")[1] if result["error"].count("'") >= 2 else "?"
    requirements = os.path.join(os.path.abspath(fit["repo"]), "requirements.txt")
    if os.path.isfile(requirements):
        result["requirements"] = requirements


def _so_far(report, entry):
    return dict(report, devices=report["devices"] + ([entry] if entry is not None else []))


def _started(report, entry, test, index, seconds_left):
    """A line as a test starts, with every result so far: if the worker ends during the test, preflight knows
    which test that was and keeps the others."""
    global _now
    _now = (test, index, "", time.monotonic())
    _write({"progress": {"test": test, "device": index, "status": "started", "resident_bytes": _resident(),
                         "seconds_left": round(max(0.0, seconds_left), 1)}, "so_far": _so_far(report, entry)})


def _doing(what):
    """What the running test does now, for the heartbeat."""
    global _now
    _now = (_now[0], _now[1], what, _now[3])


def _progress(report, entry, test, index, seconds_left):
    """A line as each test finishes: which, on which device, how it ended, the time left, and every result so far
    (preflight keeps the last one: a deadline then loses only the test it cut)."""
    global _now
    _now = (None, None, "", 0.0)
    result = entry.get(test) if entry is not None else report["checks"].get(test)
    status = ("error" if "error" in result else "skipped" if "skipped" in result else "done") \
        if isinstance(result, dict) else "done"
    _write({"progress": {"test": test, "device": index, "status": status,
                         "seconds_left": round(max(0.0, seconds_left), 1)}, "so_far": _so_far(report, entry)})


def _heartbeat(left):
    """While a test has run HEARTBEAT seconds or more, a line every HEARTBEAT seconds: which, what it is doing,
    for how long, the worker's resident memory (what the out-of-memory killer looks at) and the time left."""
    last = 0.0
    while True:
        time.sleep(1.0)
        test, index, doing, since = _now
        now = time.monotonic()
        if test is None or now - since < HEARTBEAT or now - last < HEARTBEAT:
            continue
        last = now
        _write({"progress": {"test": test, "device": index, "status": "running", "doing": doing,
                             "seconds": round(now - since), "resident_bytes": _resident(),
                             "seconds_left": round(max(0.0, left()), 1)}})


def _resident():
    """This process's resident memory in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _write(message):
    line = json.dumps(message) + "\n"
    with _channel_lock:
        _channel.write(line)
        _channel.flush()


def _emit(report):
    _write(report)
    return 0


def _one_line(exc):
    text = ("%s: %s" % (type(exc).__name__, exc)).strip()
    return " ".join(text.split())[:500]


def _guarded(run):
    try:
        return run()
    except Exception as exc:  # the failure is the finding
        frames = traceback.extract_tb(sys.exc_info()[2])
        return {"error": _one_line(exc), "where": "%s:%d" % (os.path.basename(frames[-1].filename),
                                                             frames[-1].lineno) if frames else ""}


def _indices(torch, kind, wanted):
    if kind != "cuda":
        return [0]
    count = torch.cuda.device_count()
    if not wanted:
        return list(range(count))
    return [i for i in wanted if 0 <= i < count]


def _name(torch, device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device.index)
    return "CPU"


def _release(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- memory: write patterns, read them back ---------------------------------------------------------------

def _memory(torch, device, share, until):
    block = 64 * MIB
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device.index)
        wanted = int(free * share)
    else:
        free, total, wanted = None, None, block  # the logic on the CPU, not a test of the host's RAM
    started = time.monotonic()
    blocks, errors, tested = [], 0, 0
    try:
        while tested + block <= wanted and time.monotonic() < until:
            blocks.append(torch.empty(block, dtype=torch.uint8, device=device))
            tested += block
        patterns = (lambda n: torch.full((n,), 0x55, dtype=torch.uint8, device=device),
                    lambda n: torch.full((n,), 0xAA, dtype=torch.uint8, device=device),
                    lambda n: (torch.arange(n, dtype=torch.int64, device=device) % 251).to(torch.uint8))
        for make in patterns:
            pattern = make(block)
            for buffer in blocks:
                buffer.copy_(pattern)
            _sync(torch, device)
            for buffer in blocks:
                errors += int((buffer != pattern).sum().item())
            del pattern
            if time.monotonic() >= until:
                break
    finally:
        del blocks
    return {"tested_bytes": tested, "free_bytes": free, "total_bytes": total, "errors": errors,
            "seconds": round(time.monotonic() - started, 3)}


# --- compute correctness: matrix products against a float64 reference ------------------------------------

def _matmul(torch, device):
    size = 1024 if device.type == "cuda" else 256
    generator = torch.Generator().manual_seed(1234)
    a = torch.rand(size, size, generator=generator, dtype=torch.float64) * 2 - 1
    b = torch.rand(size, size, generator=generator, dtype=torch.float64) * 2 - 1
    reference = a @ b
    scale = float(reference.abs().max())
    results = {}
    supports_bf16 = device.type == "cpu" or torch.cuda.get_device_capability(device.index)[0] >= 8
    precisions = [("fp32", torch.float32, False), ("tf32", torch.float32, True), ("fp16", torch.float16, False),
                  ("bf16", torch.bfloat16, False)]
    for name, dtype, tf32 in precisions:
        if name == "tf32" and (device.type == "cpu" or torch.cuda.get_device_capability(device.index)[0] < 8):
            results[name] = {"supported": False}
            continue
        if name == "bf16" and not supports_bf16:
            results[name] = {"supported": False}
            continue
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            product = (a.to(device=device, dtype=dtype) @ b.to(device=device, dtype=dtype)).to("cpu", torch.float64)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        error = float((product - reference).abs().max()) / scale
        results[name] = {"supported": True, "max_relative_error": error if math.isfinite(error) else None,
                         "finite": bool(torch.isfinite(product).all())}
    return results


# --- throughput: matrix-multiply TFLOPS and device-memory bandwidth ---------------------------------------

def _throughput(torch, device, until):
    cuda = device.type == "cuda"
    size = 4096 if cuda else 512
    dtype = torch.float16 if cuda else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b  # warm-up (kernel selection)
    _sync(torch, device)
    runs, started = 0, time.monotonic()
    while runs < 200 and (time.monotonic() - started < 0.5 or runs < 3) and time.monotonic() < until:
        a @ b
        runs += 1
        if runs % 10 == 0:
            _sync(torch, device)
    _sync(torch, device)
    seconds = max(time.monotonic() - started, 1e-9)
    tflops = 2.0 * size ** 3 * runs / seconds / 1e12
    del a, b
    elements = (256 if cuda else 32) * MIB // 4
    source = torch.empty(elements, dtype=torch.float32, device=device).fill_(1.0)
    target = torch.empty_like(source)
    target.copy_(source)
    _sync(torch, device)
    copies, started = 0, time.monotonic()
    while copies < 500 and (time.monotonic() - started < 0.3 or copies < 3) and time.monotonic() < until:
        target.copy_(source)
        copies += 1
    _sync(torch, device)
    seconds_copy = max(time.monotonic() - started, 1e-9)
    bandwidth = 2.0 * elements * 4 * copies / seconds_copy / 1e9  # read and write
    return {"matmul_tflops": round(tflops, 3), "matmul_dtype": str(dtype).replace("torch.", ""),
            "bandwidth_gbs": round(bandwidth, 2)}


# --- a training step: convolutions, batch norm, AMP, backward, optimizer -----------------------------------

def _train_step(torch, device):
    nn = torch.nn
    torch.backends.cudnn.benchmark = True
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.SiLU(),
        nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.SiLU(),
        nn.Conv2d(64, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cuda = device.type == "cuda"
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    scaler = _scaler(torch) if cuda else None
    images = torch.randn(8, 3, 128, 128, device=device)
    labels = torch.randint(0, 10, (8,), device=device)
    losses = []
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            loss = nn.functional.cross_entropy(model(images), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(float(loss.detach().float()))
    finite_grads = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    return {"ok": all(math.isfinite(v) for v in losses) and finite_grads, "losses": ["%.4g" % v for v in losses],
            "amp": str(amp_dtype).replace("torch.", ""), "finite_gradients": finite_grads,
            "cudnn": bool(torch.backends.cudnn.is_available()) if cuda else None}


def _scaler(torch, enabled=True):
    """AMP's gradient scaler: torch.amp.GradScaler("cuda") where it exists (torch 2.3 and newer), else the older
    torch.cuda.amp one the YOLOv9 trainers use."""
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


# --- several GPUs: peer access and an all-reduce over a local rendezvous ------------------------------------

def _collective(torch, kind, indices, time_left):
    import tempfile

    result = {"peers": []}
    if kind == "cuda":
        for i in indices:
            for j in indices:
                if i < j:
                    result["peers"].append(_peer(torch, i, j))
        world = len(indices)
        backend = "nccl"
    else:
        world = 2  # two CPU processes over gloo: the same code path, without a GPU
        backend = "gloo"
    if world < 2:
        result["allreduce"] = {"skipped": "one GPU: nothing to reduce across"}
        return result
    import torch.multiprocessing as mp

    folder = tempfile.mkdtemp(prefix="preflight-smoke-")
    rendezvous = os.path.join(folder, "rendezvous")
    answers = os.path.join(folder, "answers")
    os.mkdir(answers)
    timeout = max(2.0, min(30.0, time_left - 2))
    try:
        deadline = time.monotonic() + timeout
        context = mp.start_processes(_rank, args=(world, backend, kind, indices, rendezvous, answers, timeout),
                                     nprocs=world, join=False, start_method="spawn")
        finished = False
        while not finished and time.monotonic() < deadline:
            finished = context.join(max(0.1, deadline - time.monotonic()))
        if not finished:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
            result["allreduce"] = {"error": "the all-reduce over %d %s ranks did not finish within %.0f s (%s)"
                                            % (world, kind, timeout, backend)}
            return result
        ranks = []
        for rank in range(world):
            with open(os.path.join(answers, "%d.json" % rank)) as handle:
                ranks.append(json.load(handle))
        result["allreduce"] = {"backend": backend, "world": world, "correct": all(r["correct"] for r in ranks),
                               "bus_gbs": min(r["bus_gbs"] for r in ranks),
                               "errors": [r["error"] for r in ranks if r.get("error")]}
        return result
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _rank(rank, world, backend, kind, indices, rendezvous, answers, timeout):
    import datetime

    import torch
    import torch.distributed as dist

    answer = {"correct": False, "bus_gbs": 0.0}
    try:
        if kind == "cuda":
            torch.cuda.set_device(indices[rank])
            device = torch.device("cuda", indices[rank])
        else:
            device = torch.device("cpu")
        dist.init_process_group(backend, init_method="file://" + rendezvous, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout))
        elements = (64 if kind == "cuda" else 4) * MIB // 4
        tensor = torch.full((elements,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        expected = world * (world + 1) / 2.0
        answer["correct"] = bool((tensor == expected).all())
        runs, started = 5, time.monotonic()
        for _ in range(runs):
            dist.all_reduce(tensor)
        if kind == "cuda":
            torch.cuda.synchronize(device)
        seconds = max(time.monotonic() - started, 1e-9)
        # The bus bandwidth NCCL's own tests report for an all-reduce: 2 (n - 1) / n of the data, per second.
        answer["bus_gbs"] = round(elements * 4 * runs * 2.0 * (world - 1) / world / seconds / 1e9, 2)
        dist.destroy_process_group()
    except Exception as exc:
        answer["error"] = _one_line(exc)
    with open(os.path.join(answers, "%d.json" % rank), "w") as handle:
        json.dump(answer, handle)


def _peer(torch, i, j):
    entry = {"pair": [i, j], "access": bool(torch.cuda.can_device_access_peer(i, j))}
    source = torch.empty(64 * MIB // 4, dtype=torch.float32, device=torch.device("cuda", i)).fill_(2.0)
    target = source.to(torch.device("cuda", j))
    torch.cuda.synchronize(j)
    started = time.monotonic()
    for _ in range(5):
        target.copy_(source)
    torch.cuda.synchronize(j)
    seconds = max(time.monotonic() - started, 1e-9)
    entry["gbs"] = round(5 * 64 * MIB / seconds / 1e9, 2)
    entry["correct"] = bool((target == 2.0).all())
    return entry


# --- a measured workload fit: the user's YOLOv9 checkout, synthetic images ------------------------------------

def _fit(torch, kind, indices, fit, time_left):
    """A few training steps of the workload's model from the user's checkout, at the batch asked and at half of
    it, on synthetic images and targets with the trainer's loss, AMP and SGD: the peak memory of each and the
    per-image slope between them. Nothing is written into the checkout (no bytecode either)."""
    sys.dont_write_bytecode = True
    repo = os.path.abspath(fit["repo"])
    cfg = os.path.join(repo, fit["cfg"])  # an absolute --cfg stays as it is
    if not os.path.isfile(cfg):
        return {"error": "no model definition at %s" % cfg}
    classes = 80
    if fit.get("data"):
        data = os.path.join(repo, fit["data"])
        try:
            import yaml  # the checkout's requirements include PyYAML

            with open(data) as handle:
                classes = int(yaml.safe_load(handle)["nc"])
        except Exception as exc:
            return {"error": "cannot read nc (the number of classes) from %s: %s" % (data, _one_line(exc))}
    started = time.monotonic()
    budget = float(fit.get("budget") or time_left)
    cuda = kind == "cuda"
    imgsz, batch = int(fit["imgsz"]), int(fit["batch"])
    bounded = None
    if not cuda:  # time only: at a size that cannot exhaust the host's memory (the trainer's would, at 640)
        limits = fit.get("cpu_limits") or {}
        small_batch = min(batch, int(limits.get("batch", batch)))
        small_imgsz = min(imgsz, int(limits.get("imgsz", imgsz)))
        if (small_batch, small_imgsz) != (batch, imgsz):
            bounded = "batch %d at --img %d (asked: batch %d at --img %d)" % (small_batch, small_imgsz, batch, imgsz)
            batch, imgsz = small_batch, small_imgsz
    _doing("building the model from %s" % fit["cfg"])
    sys.path.insert(0, repo)
    from models.yolo import (
        Model,  # the checkout's own code: what the trainer would build
    )

    loss_module = __import__(fit.get("loss_module", "utils.loss_tal"), fromlist=["ComputeLoss"])
    device = torch.device(kind, indices[0]) if cuda else torch.device("cpu")
    model = Model(cfg, ch=3, nc=classes).to(device)
    model.hyp = _hyp(os.path.join(repo, fit.get("hyp") or "data/hyps/hyp.scratch-high.yaml"))
    # The trainer keeps an exponential moving average of the weights (ModelEMA, a full copy on the GPU): counted.
    ema = copy.deepcopy(model).train(False)
    for parameter in ema.parameters():
        parameter.requires_grad_(False)
    compute_loss = loss_module.ComputeLoss(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    scaler = _scaler(torch, enabled=cuda)
    objects = int(fit.get("objects", 8))
    steps = int(fit.get("steps", 2))
    measured = []
    stopped = None
    last = None  # (batch, seconds) of the latest step: what the next one will take, scaled by its batch
    for size in sorted({max(1, batch // 2), batch}):
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        times = []
        for step in range(steps):
            expected = last[1] * size / float(last[0]) if last else 0.0
            if time.monotonic() - started + expected > budget:
                stopped = ("its %.0f s budget ended before batch %d's step %d" % (budget, size, step + 1) if not last
                           else "batch %d's step %d would take about %.0f s (a step of batch %d took %.1f s) and "
                           "end after its %.0f s budget" % (size, step + 1, expected, last[0], last[1], budget))
                break
            _doing("batch %d at --img %d, step %d of %d" % (size, imgsz, step + 1, steps))
            began = time.monotonic()
            images = torch.rand(size, 3, imgsz, imgsz, device=device)
            targets = _targets(torch, size, objects, device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, enabled=cuda):
                predictions = model(images)
                loss, _ = compute_loss(predictions, targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            with torch.no_grad():
                for kept, current in zip(ema.state_dict().values(), model.state_dict().values()):
                    if kept.dtype.is_floating_point:
                        kept.mul_(0.9999).add_(current.detach(), alpha=0.0001)
            _sync(torch, device)
            times.append(time.monotonic() - began)
            last = (size, times[-1])
        if not times:
            break
        point = {"batch": size, "loss": "%.4g" % float(loss.detach().float().sum()), "steps": len(times),
                 "seconds_per_step": round(sum(times) / len(times), 4)}
        if cuda:
            torch.cuda.synchronize(device)
            point["allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))
            point["reserved_bytes"] = int(torch.cuda.max_memory_reserved(device))
        measured.append(point)
        if stopped:
            break
    result = {"points": measured, "device": str(device), "imgsz": imgsz, "cfg": fit["cfg"], "classes": classes,
              "budget_seconds": round(budget, 1), "seconds": round(time.monotonic() - started, 2)}
    if bounded:
        result["bounded"] = bounded
    if stopped:
        result["stopped"] = stopped
    if cuda and len(measured) == 2:
        low, high = measured
        slope = (high["reserved_bytes"] - low["reserved_bytes"]) / float(high["batch"] - low["batch"])
        result["per_image_bytes"] = int(slope)
        free, total = torch.cuda.mem_get_info(device)
        result["total_bytes"] = int(total)
        fixed = high["reserved_bytes"] - slope * high["batch"]
        result["largest_batch"] = int((total - fixed) // slope) if slope > 0 else None
    del model, ema, optimizer
    if cuda:
        torch.cuda.empty_cache()
    return result


# The loss's hyperparameters when the checkout's hyp.scratch-high.yaml cannot be read (the values it holds).
_HYP = {"box": 7.5, "cls": 0.5, "cls_pw": 1.0, "dfl": 1.5, "fl_gamma": 0.0, "label_smoothing": 0.0}


def _hyp(path):
    try:
        import yaml  # the checkout's requirements include PyYAML

        with open(path) as handle:
            return dict(_HYP, **yaml.safe_load(handle))
    except Exception:
        return dict(_HYP)


def _targets(torch, batch, objects, device):
    """YOLO targets (image index, class, x, y, w, h), ``objects`` boxes per image."""
    rows = []
    for image in range(batch):
        boxes = torch.rand(objects, 4)
        boxes[:, 2:] = boxes[:, 2:] * 0.2 + 0.05
        rows.append(torch.cat([torch.full((objects, 1), float(image)), torch.zeros(objects, 1), boxes], 1))
    return torch.cat(rows).to(device)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
