"""The vocabulary of ``{name}`` placeholders that messages, fixes and failure contexts may use.

One place for every name: a result's own values, each fact's value and
details, each comparison's details and parameters, and the values a failure
pattern captures from a log line (also as ``run_<name>``, filled from the log
only). The loader checks every placeholder in a rule file against it.
"""

from __future__ import annotations

import functools

from preflight.engine.compare import COMPARISONS
from preflight.facts.registry import REGISTRY

BASE_PLACEHOLDERS = {"observed", "expected", "subject", "profile", "rule_id", "title"}

# Values a failure pattern can capture from a log line (named groups), which
# any fix may use. An entry may capture other names for its own context and
# inline fix.
LOG_VALUES = {
    "requested": "memory the failed allocation asked for (12.50 GiB)",
    "cuda_device": "CUDA device index named in the message",
    "gpu_sm": "the GPU's architecture named in the message (sm_120)",
    "torch_archs": "the architectures torch says it supports",
    "driver_cuda_code": "the driver's CUDA version as PyTorch prints it (11040); gives {driver_cuda} and {run_driver_cuda}",
    "missing": "a module that could not be imported; gives {missing_pip}",
    "observed": "the value the message reports (for example an unsatisfied requirement)",
    "conda_env": "a conda environment name",
    "requirement": "a pip requirement",
    "device": "a --device value",
    "port": "a network port named in the message (the rendezvous port)",
    "dll": "a Windows DLL named in the message",
    "peer": "the address of a peer NCCL could not reach",
    "pinned_verb": "an InfiniBand call that pins host memory (ibv_reg_mr, ibv_create_qp), which the locked-memory limit refuses",
    "winerror": "a Windows error number (WinError N)",
    "capacity": "the GPU's whole memory as an out-of-memory message states it (12.00 GiB)",
    "omp_dll": "torch's DLL that needs the OpenMP runtime libomp140.x86_64.dll (fbgemm)",
    "label_class": "the highest class index a YOLO label file uses (2.0)",
    "nc": "the number of classes a YOLO data YAML declares",
    "node": "a cluster node's name (Slurm's messages)",
    "triton_requirement": "empty, present when the requirement pip found no version of is triton: shows Triton's own step",
    "pip_versions": "the versions pip lists as found for this interpreter (from versions: ...); gives {pip_oldest_listed}",
    "placeholder_torch": "the torch 0.1.2 placeholder pip fell back to where PyPI had no torch wheel for the Python",
    "cupy_core_missing": "empty, present when CuPy 1-9 said it is not correctly installed: shows CuPy's own step",
}
# Values computed from a named group (see diagnose.diagnosis).
# The torch to install (torch_wheels.fix_values) follows from the driver's CUDA and the GPU the log names.
WHEEL_VALUES = ("index_url", "arch_index_url", "torch_pins", "wheel_cuda", "wheel_torch", "wheel_tag", "wheel_runs",
                "wheel_note", "no_wheel", "archived_torch", "wheel_basis")
DERIVED_FROM_GROUPS = {"driver_cuda_code": ("driver_cuda", "run_driver_cuda") + WHEEL_VALUES,
                       "missing": ("missing_pip", "pip_unknown", "companion_pins", "companion_index_url",
                                   "companion_unpaired"), "gpu_sm": WHEEL_VALUES,
                       "pip_versions": ("pip_oldest_listed",)}
# What a clue may capture: the run's own values, as templates see them with the run_ prefix.
CLUE_VALUES = {
    "python": "the run's Python version (YOLO banner)",
    "torch_version": "the run's torch (YOLO banner, a printed torch.__version__)",
    "gpu_name": "the run's GPU (YOLO banner, nvidia-smi)",
    "gpu_mib": "the run's GPU memory in MiB (YOLO banner)",
    "gpu_count": "how many GPUs the run used (YOLO banner lines)",
    "cfg": "the model config the run trained (train_dual.py arguments)",
    "batch": "the batch size the run asked for",
    "imgsz": "the image size the run asked for",
    "device": "the --device the run asked for",
    "driver_version": "the driver version (nvidia-smi header)",
    "driver_cuda": "the newest CUDA the driver supports (nvidia-smi header)",
    "os": "the run's operating system: windows, macos or linux (paths, WinError, a uname line)",
    "distro": "the run's Linux distribution family: rhel (with Fedora), debian or ubuntu (a distribution name, a package tool, a kernel tag)",
    "driver_build": "akmods when the NVIDIA kernel module is built by RPM Fusion's akmod-nvidia",
    "amp_unsafe": "yes when the run's GPU is one whose mixed precision gives NaN losses (GTX 16 series, Quadro T400 to T2000, Tesla K40m)",
    "amp_unsafe_gpu": "that GPU as the log names it",
    "wsl": "yes when the run was under WSL2 (its kernel, /usr/lib/wsl)",
    "managed": "a hosted notebook whose driver the user cannot change: colab, kaggle or aistudio",
    "yolo": "the YOLO code that ran: yolov9, yolov5, yolov7, ultralytics or yolox (its scripts, banner, paths)",
    "font": "the plot font a YOLO trainer downloaded (Arial.ttf, Arial.Unicode.ttf)",
    "host": "the run's host name (a shell prompt, NCCL's host:pid:tid lines)",
    "program": "the script the run started (its command line, or a traceback's first frame)",
    "site_packages": "the run's site-packages folder (traceback paths)",
    "library_version": "the NVIDIA user-space library version (nvidia-smi's 'NVML library version')",
    "module_version": "the loaded NVIDIA kernel module version (NVRM: API mismatch, /proc/driver/nvidia/version)",
    "nccl_ifname": "NCCL_SOCKET_IFNAME as the run's NCCL read it (NCCL_DEBUG=INFO)",
    "nccl_interface": "the network interface the run's NCCL chose (NCCL_DEBUG=INFO 'Using [0]eth0')",
    "gres": "the GPUs a Slurm job asked for with --gres (its #SBATCH lines or command)",
    "gpus": "the GPUs a Slurm job asked for with --gpus",
    "partition": "the Slurm partition a job script names",
    "image": "the container image the run started (a docker or podman run line with a tagged image, a pod event)",
    "conda_env": "the conda environment the run activated (a conda activate command in the log)",
    "jetson": "yes when the run was on a Jetson (L4T or JetPack named, a -tegra kernel, an Orin or Xavier GPU)",
    "python_bits": "32 when the run's Python is a 32-bit build (python.org's Windows folder PythonXY-32)",
    "gpu_virtualization": "vgpu when the run's GPU is an NVIDIA vGPU (its profile name, a GRID driver)",
    "framework": "the run's deep-learning framework where it is not torch: paddle (its paths, C++ namespaces, messages) or jax (its paths and error types)",
    "driver_owner": "gpu-operator when NVIDIA's GPU Operator owns the node's driver (its namespace, daemonsets or driver container in the log)",
    "slurm": "yes when the run was a Slurm job (srun or sbatch messages, SLURM_ variables)",
    "container_network": "bridge when NCCL's ranks ran in Docker's bridge network (an address of 172.17-172.19.x.x on NCCL's interface); own when NCCL's host name is a container ID (a network namespace of its own)",
    "container_runtime": "what ran the container: docker, containerd or cri-o on a Kubernetes node (kubectl describe node, a container ID's prefix); singularity for Singularity or Apptainer (its prompt, or a singularity or apptainer command)",
    "cuda_allocator": "cudaMallocAsync when the run's torch allocates with it (ComfyUI's device line and default, PYTORCH_CUDA_ALLOC_CONF)",
    "yolox_occupy": "yes when YOLOX's -o (--occupy) preallocation ran (its tools/train.py command line, occupy_mem in a traceback)",
    "cudnn_failed": "yes when a cuDNN call failed (a CUDNN_STATUS_ name other than SUCCESS)",
    "build_failed": "yes when a native build failed (pip's Failed building wheel, torch's Error compiling objects for extension)",
    "ultralytics_load": "yes when the traceback shows Ultralytics' own checkpoint loader (nn/tasks.py torch_safe_load, attempt_load_one_weight)",
    "deepspeed_op": "the file of DeepSpeed's ops package a traceback frame names (adam/fused_adam.py): the call is one of DeepSpeed's CUDA extensions",
}
# Markers a fix line can carry so that it shows only where it applies: each is "" (shown) or unknown (the line is
# left out). Computed from a log's clues and this machine's facts (facts.platform): by diagnose, and by check
# (from the facts alone) for the fixes of failing rules.
FIX_CONDITIONS = {
    "when_linux": "the run is not known to be on Windows or macOS",
    "when_windows": "the run was on Windows",
    "when_macos": "the run was on macOS, for which PyTorch publishes no CUDA build",
    "when_not_macos": "the run is not known to be on macOS (a CUDA build of torch can exist for it)",
    "when_apt": "the run is on Linux and not known to be RHEL-family (apt-get works)",
    "when_rhel": "the run was on a RHEL-family Linux (Rocky, Alma, CentOS, RHEL, Fedora)",
    "when_akmods": "the NVIDIA kernel module is built by akmods (RPM Fusion's akmod-nvidia)",
    "when_not_akmods": "the NVIDIA kernel module is not known to be built by akmods",
    "when_no_driver_seen": "diagnose only: neither the log nor this machine's facts show an NVIDIA driver",
    "when_ubuntu": "the run is on Linux and not known to be RHEL-family or Debian (ubuntu-drivers works)",
    "when_debian": "the run was on Debian (apt works, ubuntu-drivers does not)",
    "when_wsl": "the run was under WSL2",
    "when_not_wsl": "the run is not known to be under WSL2 (there, the Windows driver serves Linux: no NVIDIA kernel modules to load, no /dev/nvidia* device nodes)",
    "when_own_driver": "the user can change the driver: not a hosted notebook, not WSL2 (the Windows driver serves it)",
    "when_managed": "the run was in a hosted notebook (Colab, Kaggle, AI Studio): the driver is the platform's",
    "when_yolov9": "the log is YOLOv9's (its scripts, banner or paths)",
    "when_not_yolov9": "the log is not known to be YOLOv9's",
    "when_yolov7": "the log is YOLOv7's (its configs, trainers, hyp files or OTA loss)",
    "when_yolox_occupy": "YOLOX ran with -o (--occupy), which reserves most of the GPU's memory in one allocation before training",
    "when_paddle": "the log is PaddlePaddle's (its paths, C++ namespaces or messages)",
    "when_jax": "the log is JAX's (its paths and error types)",
    "when_torch": "the log is not known to be another framework's (PaddlePaddle, JAX)",
    "when_libraries_newer": "the log shows user-space NVIDIA libraries newer than the loaded kernel module",
    "when_libraries_older": "the log shows user-space NVIDIA libraries older than the loaded kernel module",
    "when_gpu": "the machine has an NVIDIA GPU (this machine's facts, or the log's nvidia-smi)",
    "when_no_gpu": "the machine is known to have no NVIDIA GPU",
    "when_request_exceeds_gpu": "the out-of-memory message shows one allocation larger than the GPU's whole memory",
    "when_request_may_fit": "no out-of-memory message shows one allocation larger than the GPU's whole memory",
    "when_interpreter_guessed": "diagnose names no interpreter of the job's own: neither the log's traceback nor --python shows it",
    "when_jetson": "the run was on a Jetson: torch comes from NVIDIA's JetPack builds, the driver with L4T",
    "when_python_32bit": "the run's Python is a 32-bit build, for which no torch wheel exists",
    "when_ultralytics_load": "the traceback shows Ultralytics' own checkpoint loader",
    "when_not_jetson": "the run is not known to be on a Jetson (PyTorch's own indexes apply)",
    "when_operator": "NVIDIA's GPU Operator owns the node's driver and container toolkit",
    "when_slurm": "the run was a Slurm job",
    "when_singularity": "the run was in a Singularity or Apptainer container (its prompt or command in the log)",
    "when_bridge_network": "NCCL's ranks ran in Docker's bridge network",
    "when_container_network": "NCCL's ranks ran in a container with a network of its own (Docker's bridge, or a container ID as host name)",
    "when_docker_runtime": "the node's container runtime is Docker (dockershim, cri-dockerd)",
    "when_crio_runtime": "the node's container runtime is CRI-O",
    "when_containerd_runtime": "the node's container runtime is containerd, or not known to be another",
}


# Values diagnose computes from a log's own run (its clues): the capacity model's largest batch for an
# out-of-memory run, and the GPUs the run used.
RUN_DERIVED = ("fit_batch", "fit_workload", "fit_imgsz", "fit_gpu_mib", "gpu_count", "device_list", "ddp_batch",
               "single_gpu",
               "run_compute_capability", "run_torch_cuda")
# Values from the knowledge data, the same wherever a fix is shown (diagnose fills them).
KNOWLEDGE_VALUES = {"torch_pythons": "the Pythons the newest torch that can be pinned has wheels for (3.10 to 3.14)"}
# Every captured value is also available as run_<name>: filled only from the
# log, never from this machine's facts, for lines about the failed run itself.
RUN_PREFIX = "run_"


def fact_variable(path: str) -> str:
    """The template name of a fact's value: gpu.memory.total -> gpu_memory_total."""
    return path.replace(".", "_")


@functools.lru_cache(maxsize=1)
def all_placeholders() -> frozenset:
    """Every name a shared [[fix]] may use: result values, fact details and values, and log values."""
    names = set(BASE_PLACEHOLDERS) | set(LOG_VALUES)
    for derived in DERIVED_FROM_GROUPS.values():
        names.update(derived)
    names.update(RUN_DERIVED)
    names.update(KNOWLEDGE_VALUES)
    names.update(FIX_CONDITIONS)
    names.update(RUN_PREFIX + name for name in CLUE_VALUES)
    names.update(RUN_PREFIX + name for name in LOG_VALUES)
    for fact in REGISTRY.values():
        names.update(fact.details)
        names.add(fact_variable(fact.path))
    for comparison in COMPARISONS.values():
        names.update(comparison.details)
        names.update(comparison.params)
    return frozenset(names)
