"""table.py — what the benchmark reports (bench/*_report.py) share: the machine's CPU and the commit measured, and
a median with its spread."""
import platform
import statistics
import subprocess


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit():
    """The checkout's HEAD, short."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


def spread(values):
    """(median, lowest, highest) of values; None for none."""
    return (statistics.median(values), min(values), max(values)) if values else None
