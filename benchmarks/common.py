"""Shared helpers of the benchmarks: timing, memory, machine details.

Benchmarks are not tests: `make bench` runs them; tests/test_benchmarks.py
runs each at a tiny size so they cannot rot.
"""

import json
import os
import platform
import statistics
import threading
import time

import psutil

#: Real MNIST for the training benchmark (5,000 digits; never used at run time
#: by the package).
DEFAULT_MNIST = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "..",
    "shared",
    "data",
    "mnist-offline.npz",
)


def interleaved_medians(candidates, repeats, warmup, pause=0.3):
    """Runs every candidate `warmup` times, then `repeats` rounds in turn.

    Args:
        candidates: dict name -> zero-argument callable that blocks until its
            work is done.
        repeats: Timed rounds; each round runs every candidate once, so slow
            drifts of the machine hit all candidates alike.
        warmup: Untimed calls per candidate first (compilation, caches).
        pause: Seconds of sleep before each timed call. The frameworks' thread
            pools keep spinning for a while after their work is done (measured
            here: labml's Router ran 40% slower right after a tensorflow call
            without it); the pause lets them go idle, so that no candidate
            pays for the one before it.

    Returns:
        dict name -> {"median_ms", "min_ms", "times_ms"}.
    """
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            time.sleep(pause)
            start = time.perf_counter()
            fn()
            times[name].append(1000 * (time.perf_counter() - start))
    return {
        name: {
            "median_ms": statistics.median(t),
            "min_ms": min(t),
            "times_ms": [round(v, 2) for v in t],
        }
        for name, t in times.items()
    }


_PROCESS = psutil.Process()


def rss_mb():
    """This process' resident memory now, in MB."""
    return _PROCESS.memory_info().rss / 2**20


class PeakRSS:
    """Samples this process' resident memory in a thread; reports the peak.

    `with PeakRSS() as peak: ...` then `peak.before_mb`, `peak.peak_mb` and
    `peak.increase_mb` (peak during the block minus the RSS when it began).
    """

    def __init__(self, interval=0.002):
        self.interval = interval

    def __enter__(self):
        self.before_mb = rss_mb()
        self.peak_mb = self.before_mb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            rss = rss_mb()
            self.peak_mb = max(self.peak_mb, rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        rss = rss_mb()
        self.peak_mb = max(self.peak_mb, rss)
        self.increase_mb = self.peak_mb - self.before_mb
        return False


def machine():
    """A few facts about the machine the numbers come from.

    Keras' version is read from its metadata: importing it would import a
    backend, seconds in the processes that only collect and report.
    """
    from importlib.metadata import version

    import numpy
    import torch

    return {
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "keras": version("keras"),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def add_new_output(parser):
    """`--out FILE` (or - for stdout) for a result that is never overwritten."""
    parser.add_argument("--out", default="-", help="JSON file, or - for stdout")


def check_new_output(path):
    """Exits when `path` holds an earlier result: results are kept."""
    if path != "-" and os.path.exists(path):
        raise SystemExit(f"{path} exists; give a new file (results are kept)")


def write_json(path, data):
    if path == "-":
        print(json.dumps(data))
        return
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


def write_results(path, benchmark, args, results):
    """`write_json` of a timing run: its name, the machine, the settings, the rows."""
    write_json(
        path,
        {
            "benchmark": benchmark,
            "machine": machine(),
            "settings": vars(args),
            "results": results,
        },
    )
