"""`make bench`: throughput, memory and live latency of the translator, printed as figures.

Throughput: the translator, a jq program doing the same fold (bench/fold.jq), and a Python loop
that only orjson-parses every line, and the translator's own reading with no fold (bench/read_only.py,
the least its fold can add to), on one >= 100 MB reference stream, commands alternated,
median wall time of each. Memory: peak RSS on that stream and on 2x and 4x of it (fed through
a pipe), to show it stays flat. Latency: a live pipe fed one event per millisecond; for every
output frame, the time from the write of the input line that produced it to the frame's arrival.
Metrics: the same replay with --metrics on and off (`--only metrics` runs just that); the same
for --transcripts (`--only transcripts`, target <= 1.7x the CPU time off). `--transcripts`: every figure with --transcripts on.
Telemetry: the same replay with Claude Code's OpenTelemetry export off and on (bench/telemetry.py,
`--only telemetry`); `--telemetry` runs every figure with it on.

    python bench/run.py [--mb 100] [--rounds 5] [--latency-events 4000] [--only metrics|transcripts|telemetry]
                        [--transcripts] [--telemetry]

Every figure with a target is checked; the run ends with a list of the targets missed and exits 1
when there is any (a figure that could not be measured, e.g. jq not installed, counts as missed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE.parent))

from bench.gen import generate, run_events  # noqa: E402

PY = sys.executable
TRANSLATOR = str(Path(PY).parent / "translator")
ON: list[str] = []  # options every translator command of the figures runs with (--transcripts DIR)
# Time of the translator as a multiple of the parse-every-line floor (lower is better).
TARGETS = {"jq": 10.0, "floor": 1.5, "floor_cc": 2.5, "rss_mb": 64.0, "flat": 1.10, "p99_ms": 2.0, "idle_cpu": 0.01,
           "metrics": 1.03, "transcripts": 1.7}
MISSED: list[str] = []
STACK = contextlib.ExitStack()  # what lives as long as the run (--telemetry's sink)


def check(ok: bool, what: str) -> str:
    """Record a target; the mark printed beside its figure."""
    if not ok:
        MISSED.append(what)
    return "met" if ok else "MISSED"


def timed(cmd: list[str], stdin: Path | None = None, feed: list[str] | None = None) -> tuple[float, float]:
    """Run a command with stdout to /dev/null; wall seconds and peak RSS (MiB) of it alone.
    `feed`: a command whose stdout is piped into it instead of a file.

    The peak is read from /proc (VmHWM) while it runs: the rusage of a child of this process
    would start at this process's own size."""
    exe = shutil.which(cmd[0]) or cmd[0]
    feeder = None
    if feed is not None:
        r, w = os.pipe()
        feeder = os.posix_spawn(
            shutil.which(feed[0]) or feed[0], feed, os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)],
        )
        os.close(w)
        source = r
    else:
        source = os.open(stdin or os.devnull, os.O_RDONLY)
    start = time.perf_counter()
    pid = os.posix_spawn(
        exe, cmd, os.environ,
        file_actions=[
            (os.POSIX_SPAWN_DUP2, source, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        ],
    )
    peak = [0]
    done = threading.Event()
    poller = threading.Thread(target=_watch_rss, args=(pid, peak, done))
    poller.start()
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - start
    done.set()
    poller.join()
    os.close(source)
    if feeder is not None:
        os.waitpid(feeder, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed with status {os.waitstatus_to_exitcode(status)}")
    return wall, peak[0] / 1024


def _watch_rss(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.is_set():
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
        except (OSError, ValueError):
            pass
        done.wait(0.005)


def throughput(ref: Path, rounds: int) -> dict[str, float]:
    commands: dict[str, tuple[list[str], Path | None]] = {
        "translator": ([TRANSLATOR, *ON, "--session-id", "S", str(ref)], None),
        "translator cc": ([TRANSLATOR, *ON, "--format", "claude-code", "--session-id", "S", str(ref)], None),
        "parse-every-line": ([PY, str(HERE / "parse_only.py")], ref),
        "reading alone": ([PY, str(HERE / "read_only.py")], ref),
    }
    if shutil.which("jq"):
        commands["jq fold"] = (["jq", "-c", "-n", "--arg", "sid", "S", "-f", str(HERE / "fold.jq")], ref)
    else:
        print("jq is not installed: the jq comparison cannot be made (install it: apt-get install jq)")
        check(False, "translator vs jq: jq is not installed (apt-get install jq)")
    times: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, float] = {}
    for _ in range(rounds):
        for name, (cmd, stdin) in commands.items():
            wall, peak = timed(cmd, stdin)
            times[name].append(wall)
            rss[name] = max(rss.get(name, 0.0), peak)
    size = ref.stat().st_size / 1e6
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\nthroughput on {size:.0f} MB, {rounds} alternated rounds (median wall time):")
    for name, med in medians.items():
        print(f"  {name:18s} {med:7.3f} s  {size / med:7.1f} MB/s  peak RSS {rss[name]:6.1f} MiB")
    mine = medians["translator"]
    if "jq fold" in medians:
        ratio = medians["jq fold"] / mine
        mark = check(ratio >= TARGETS["jq"], f"translator vs jq {ratio:.1f}x (target >= {TARGETS['jq']:.0f}x)")
        print(f"  translator vs jq:            {ratio:5.1f}x faster   (target >= {TARGETS['jq']:.0f}x)   {mark}")
    for name, key in (("translator", "floor"), ("translator cc", "floor_cc")):
        ratio = medians[name] / medians["parse-every-line"]
        what = f"{name} {ratio:.2f}x the parse-every-line time (target <= {TARGETS[key]:.2f}x)"
        mark = check(ratio <= TARGETS[key], what)
        print(f"  {name + ' / parse-only:':29s}{ratio:5.2f}x the time (target <= {TARGETS[key]:.2f}x)   {mark}")
    # No target: the least any fold on this reader can take (bench/read_only.py says why).
    ratio = medians["reading alone"] / medians["parse-every-line"]
    print(f"  {'its reading alone / parse-only:':29s}{ratio:5.2f}x the time (start-up, reads, typed decode; no fold)")
    return medians


def cpu_seconds(cmd: list[str]) -> float:
    """CPU time (user + system, all threads) of a command with stdout and stderr to /dev/null:
    on a shared machine it varies far less than wall time."""
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=devnull)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed with status {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def option_overhead(ref: Path, rounds: int, option: list[str] | None = None) -> None:
    """CPU time of a file replay with --metrics (or `option`) on and off, alternated. Each command's start-up
    (the same command on an empty input) is timed too and taken off: importing prometheus_client
    is a one-time cost (printed), not a per-byte one. The target is checked on the least time of
    each (other processes on the machine only ever add to it), over at least 11 rounds: the
    effect is smaller than the noise of a few; the medians are shown too. `option` (--transcripts)
    is checked against its own target the same way."""
    rounds = max(rounds, 11)
    base = [TRANSLATOR, "--session-id", "S"]
    label = "metrics" if option is None else option[0].removeprefix("--")
    commands = {"off": base, "on": [*base, *(option or ["--metrics", "tcp:127.0.0.1:0"])]}
    work: dict[str, list[float]] = {state: [] for state in commands}
    start: dict[str, list[float]] = {state: [] for state in commands}
    for _ in range(rounds):
        for state, cmd in commands.items():
            start[state].append(cpu_seconds([*cmd, os.devnull]))
            work[state].append(cpu_seconds([*cmd, str(ref)]) - start[state][-1])
    size = ref.stat().st_size / 1e6
    print(f"\n--{label} on vs off, file replay of {size:.0f} MB, {rounds} alternated rounds (CPU time after start-up):")
    for state in commands:
        print(f"  {label} {state:3s}  least {min(work[state]):6.3f} s ({size / min(work[state]):6.1f} MB/s),"
              f" median {statistics.median(work[state]):6.3f} s; start-up {statistics.median(start[state]) * 1000:4.0f} ms")
    ratio = min(work["on"]) / min(work["off"])
    medians = statistics.median(work["on"]) / statistics.median(work["off"])
    limit = TARGETS[label]
    mark = check(ratio <= limit, f"--{label} on takes {ratio:.3f}x the CPU time of off (target <= {limit})")
    print(f"  on / off: {ratio:.3f}x the CPU time (medians: {medians:.3f}x), "
          f"+{min(work['on']) - min(work['off']):.3f} s on this stream   (target <= {limit:.2f}x)   {mark}")
    if option is not None:
        return
    print(f"  start-up: +{(statistics.median(start['on']) - statistics.median(start['off'])) * 1000:.0f} ms once"
          " (importing prometheus_client)")


def flat_memory(ref: Path) -> None:
    print("\npeak RSS as the stream grows (fed through a pipe):")
    for fmt in ("enriched", "claude-code"):
        peaks = []
        for copies in (1, 2, 4):
            _, peak = timed([TRANSLATOR, *ON, "--format", fmt], feed=["cat", *[str(ref)] * copies])
            peaks.append(peak)
            size = ref.stat().st_size * copies / 1e6
            mark = check(peak <= TARGETS["rss_mb"], f"{fmt} peak RSS {peak:.1f} MiB at {size:.0f} MB")
            print(f"  {fmt:12s} {size:6.0f} MB  peak RSS {peak:6.1f} MiB   (target <= {TARGETS['rss_mb']:.0f} MiB)   {mark}")
        growth = peaks[-1] / peaks[0]
        mark = check(growth <= TARGETS["flat"], f"{fmt} peak RSS grows {growth:.2f}x from 1x to 4x the stream")
        print(f"  {fmt:12s} 4x / 1x stream: peak RSS {growth:.2f}x   (target <= {TARGETS['flat']:.2f}x, flat)   {mark}")


def frames_per_line(lines: list[bytes], args: list[str]) -> list[int]:
    """How many output frames each input line produces, from the core itself."""
    from translator.core.rates import RateCard
    from translator.core.translator import Options, Translator
    from translator.encoders.claude_code import ClaudeCodeEncoder
    from translator.encoders.enriched import EnrichedEncoder

    partial = "--include-partial-messages" in args
    make = ClaudeCodeEncoder if "claude-code" in args else EnrichedEncoder
    core = Translator(make([], session_id="S", partial=partial), rates=RateCard.bundled(), options=Options())
    counts = []
    for line in lines:
        core.feed(line + b"\n", 0.0)
        counts.append(core.take_output().count(b"\n"))
    return counts


def latency(n_events: int, args: list[str], label: str) -> None:
    rng = random.Random(7)
    lines: list[bytes] = []
    run = 0
    while len(lines) < n_events:
        lines += run_events(rng, run)
        run += 1
    lines = lines[:n_events]
    owners = [i for i, n in enumerate(frames_per_line(lines, args)) for _ in range(n)]
    # (cut at n_events, mid-run: the translator's notice of the cut is not a figure)
    proc = subprocess.Popen([TRANSLATOR, *ON, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    sent: list[float] = [0.0] * len(lines)
    arrived: list[float] = []

    def reader() -> None:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        buf = b""
        while chunk := os.read(fd, 1 << 20):
            now = time.monotonic()
            arrived.extend([now] * chunk.count(b"\n"))
            buf += chunk

    thread = threading.Thread(target=reader)
    thread.start()
    fd = proc.stdin.fileno()
    t0 = time.monotonic() + 0.2
    for i, line in enumerate(lines):
        due = t0 + i / 1000
        while (wait := due - time.monotonic()) > 0:
            time.sleep(wait if wait > 0.0005 else 0)
        sent[i] = time.monotonic()
        os.write(fd, line + b"\n")
    time.sleep(0.1)
    proc.stdin.close()
    thread.join()
    proc.wait()
    measured = min(len(owners), len(arrived))
    lat = sorted((arrived[k] - sent[owners[k]]) * 1000 for k in range(measured))
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    mark = check(p(0.99) <= TARGETS["p99_ms"], f"live p99 {p(0.99):.3f} ms with {label}")
    print(
        f"  {label:34s} {len(lines)} events, {measured} frames: p50 {p(0.5):.3f} ms, "
        f"p99 {p(0.99):.3f} ms, max {lat[-1]:.3f} ms   (target p99 <= {TARGETS['p99_ms']:.0f} ms)   {mark}"
    )


def idle_follower(seconds: float) -> None:
    """CPU an idle `--follow` uses: it should sleep in the kernel, not poll."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "stdout.ndjson"
        log.write_bytes((HERE.parent / "fixtures" / "thinking.events.jsonl").read_bytes())
        proc = subprocess.Popen([TRANSLATOR, "--follow", str(log)], stdout=subprocess.DEVNULL)
        time.sleep(1.0)
        before = _cpu_seconds(proc.pid)
        time.sleep(seconds)
        used = _cpu_seconds(proc.pid) - before
        proc.terminate()
        proc.wait()
    share = used / seconds
    mark = check(share <= TARGETS["idle_cpu"], f"idle follower {share * 100:.3f}% of a core")
    print(
        f"\nidle follower: {used * 1000:.1f} ms of CPU in {seconds:.0f} s ({share * 100:.3f}% of a core)"
        f"   (target <= {TARGETS['idle_cpu'] * 100:.0f}%)   {mark}"
    )


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--latency-events", type=int, default=4000)
    ap.add_argument("--only", choices=("metrics", "transcripts", "telemetry"), help="run just this comparison")
    ap.add_argument("--transcripts", action="store_true", help="every figure with --transcripts on")
    ap.add_argument("--telemetry", action="store_true",
                    help="every figure with Claude Code's telemetry on (metrics and events to a loopback sink)")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    sessions = ["--transcripts", str(OUT / "transcripts")]
    if args.transcripts:
        ON.extend(sessions)
        print(f"every translator command runs with {' '.join(sessions)}")
    ref = OUT / f"ref-{args.mb:g}mb.ndjson"
    if not ref.exists():
        print(f"generating {ref.name} ...")
        generate(str(ref), args.mb)
    from bench import telemetry

    if args.only == "telemetry":
        MISSED.extend(telemetry.overhead(TRANSLATOR, ref, args.rounds))
    else:
        figures(args, ref, sessions)
    telemetry.verdict(MISSED)


def figures(args: argparse.Namespace, ref: Path, sessions: list[str]) -> None:
    """Every figure but the telemetry's own (`--only metrics|transcripts`: just that one)."""
    if args.telemetry:  # for the whole run: every command below inherits it
        from bench import telemetry

        os.environ.update(telemetry.telemetry_env(STACK.enter_context(telemetry.sink())))
    if args.only is None:
        throughput(ref, args.rounds)
    if args.only != "transcripts":
        option_overhead(ref, args.rounds)
    if args.only != "metrics":
        option_overhead(ref, args.rounds, sessions)
    if args.only is not None:
        return
    flat_memory(ref)
    print("\nlive pipe, one event per millisecond, arrival of an input line to its frame:")
    latency(args.latency_events, [], "default")
    latency(args.latency_events, ["--include-partial-messages"], "--include-partial-messages")
    latency(args.latency_events, ["--format", "claude-code"], "--format claude-code")
    idle_follower(10.0)


if __name__ == "__main__":
    main()
