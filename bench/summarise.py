#!/usr/bin/env python3
"""The summaries of the pgbench benchmarks (bench/load.sh, bench/inbox.sh), as markdown tables
ready for bench/RESULTS.md. Standard library only.

  summarise.py latency PREFIX [S1 S2]    p50 and p99 (ms) and the count of the per-transaction
                                         latencies in the pgbench -l logs PREFIX.* (column 3, µs);
                                         with two CPU samples of bench_cpu_sample (bench/lib.sh),
                                         the backends' CPU µs per transaction between them, else -
  summarise.py runs FILE [options]       medians per variant and the ratios against baselines
  summarise.py cpu FILE [options]        the same for backend CPU µs per transaction (lower is better)

FILE has one line per pgbench run: GROUP VARIANT ROUND VALUE [P50 P99 [CPU]]; '#' lines are
comments; CPU is '-' when not measured.
GROUP is one word, its fields joined by ':' (e.g. "off" or "off:4"), named by --groups
(e.g. "synchronous_commit,workers"). Options:
  --variants "a b c"         the variants, in the order of the table
  --ratios "a/b/0.95 c/b/0"  ours/baseline/goal; goal 0: for information, no verdict
  --unit TPS                 the name of VALUE in the heading
  --per tx                   what the CPU column is per (bench/outbox.sh's relay: event)

A ratio is given two ways, both from the same run: the ratio of the medians, and the median of
the per-round ratios (each round runs every variant once, back to back, so a round's ratio sees
the same machine load on both sides). met: yes when both reach the goal, borderline when one
does, NO when neither does.
"""
import glob
import math
import os
import statistics
import sys


def percentile(sorted_values, p):
    """Nearest-rank percentile of a sorted list (p in 0..100)."""
    if not sorted_values:
        return float('nan')
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def read_sample(path):
    """bench_cpu_sample's file: (time, {pid: ticks}), or None when missing or empty."""
    try:
        with open(path) as f:
            lines = f.read().split('\n')
    except OSError:
        return None
    if not lines[0].strip():
        return None
    ticks = {}
    for line in lines[1:]:
        if line.strip():
            pid, t = line.split()
            ticks[pid] = int(t)
    return float(lines[0]), ticks


def latency(prefix, samples):
    # pgbench -l writes PREFIX.<pid> (first thread) and PREFIX.<pid>.<n> (other threads); a line
    # is: client_id transaction_no latency_us script_no epoch_s epoch_us [lag_us]
    us = []
    ends = []
    for path in glob.glob(glob.escape(prefix) + '.*'):
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 6 and fields[2].isdigit():
                    us.append(int(fields[2]))
                    ends.append(int(fields[4]) + int(fields[5]) / 1e6)
    us.sort()
    cpu = '-'
    if len(samples) == 2:
        s1, s2 = read_sample(samples[0]), read_sample(samples[1])
        if s1 and s2:
            common = s1[1].keys() & s2[1].keys()
            done = sum(1 for t in ends if s1[0] < t <= s2[0])
            if common and done:
                hz = os.sysconf('SC_CLK_TCK')
                ticks = sum(s2[1][p] - s1[1][p] for p in common)
                cpu = '%.1f' % (ticks / hz * 1e6 / done)
    print('%.3f %.3f %d %s' % (percentile(us, 50) / 1000, percentile(us, 99) / 1000, len(us), cpu))


def parse_options(args):
    opts = {'--variants': '', '--ratios': '', '--groups': 'group', '--unit': 'TPS', '--per': 'tx'}
    while args:
        name = args.pop(0)
        if name not in opts or not args:
            sys.exit('summarise.py: bad option %s' % name)
        opts[name] = args.pop(0)
    ratios = [(a, b, float(g)) for a, b, g in (r.split('/') for r in opts['--ratios'].split())]
    return (opts['--variants'].split(), ratios, opts['--groups'].split(','), opts['--unit'],
            opts['--per'])


def read_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith('#'):
                fields = line.split()
                rows.append({'group': fields[0], 'variant': fields[1], 'round': fields[2],
                             'value': float(fields[3]),
                             'p50': float(fields[4]) if len(fields) > 5 else None,
                             'p99': float(fields[5]) if len(fields) > 5 else None,
                             'cpu': float(fields[6]) if len(fields) > 6 and fields[6] != '-' else None})
    return rows


def verdict(goal, values):
    if goal == 0:
        return '-'
    if all(v >= goal for v in values):
        return 'yes'
    return 'borderline' if any(v >= goal for v in values) else 'NO'


def group_cells(group):
    return ' | '.join(group.split(':'))


def summary(path, args, cpu):
    variants, ratios, group_names, unit, per = parse_options(args)
    rows = [r for r in read_rows(path) if r['value'] > 0]
    groups = list(dict.fromkeys(r['group'] for r in rows))
    variants = variants or list(dict.fromkeys(r['variant'] for r in rows))
    by = {}
    for r in rows:
        by.setdefault((r['group'], r['variant']), []).append(r)
    med = {k: statistics.median(r['value'] for r in v) for k, v in by.items()}
    with_latency = any(r['p50'] is not None for r in rows)
    cpu_of = {k: statistics.median(c) for k, c in
              ((k, [r['cpu'] for r in v if r.get('cpu') is not None]) for k, v in by.items()) if c}
    with_cpu = not cpu and bool(cpu_of)
    head = ' | '.join(group_names)
    sep = '|'.join('---' for _ in group_names)

    value = 'backend CPU µs per transaction, median (min-max)' if cpu else 'median %s (min-max)' % unit
    lat = (' p50 ms | p99 ms |' if with_latency else '') + (' backend CPU µs/%s |' % per if with_cpu else '')
    print('| %s | variant | %s |%s rounds |' % (head, value, lat))
    print('|%s|---|---:|%s---:|' % (sep, ('---:|---:|' if with_latency else '') + ('---:|' if with_cpu else '')))
    for g in groups:
        for v in variants:
            runs = by.get((g, v))
            if not runs:
                continue
            vals = [r['value'] for r in runs]
            fmt = '%.1f' if cpu else '%.0f'
            cell = (fmt + ' (' + fmt + '-' + fmt + ')') % (med[g, v], min(vals), max(vals))
            lat = ''
            if with_latency:
                # the median over the rounds of each round's percentile
                lat = ' %.2f | %.2f |' % (statistics.median(r['p50'] for r in runs),
                                          statistics.median(r['p99'] for r in runs))
            if with_cpu:
                lat += ' %s |' % ('%.1f' % cpu_of[g, v] if (g, v) in cpu_of else '-')
            print('| %s | %s | %s |%s %d |' % (group_cells(g), v, cell, lat, len(runs)))
    print()

    if cpu:
        print('| %s | cost ratio (baseline CPU / ours = throughput at equal CPU) | value | goal | met |' % head)
        print('|%s|---|---:|---:|---|' % sep)
    else:
        extra = ' CPU cost ratio (baseline / ours) |' if with_cpu else ''
        print('| %s | ratio | ratio of medians | median of per-round ratios (min-max) | goal | met |%s' % (head, extra))
        print('|%s|---|---:|---:|---:|---|%s' % (sep, '---:|' if with_cpu else ''))
    for g in groups:
        for a, b, goal in ratios:
            if (g, a) not in med or (g, b) not in med:
                continue
            if cpu:
                q = med[g, b] / med[g, a]
                print('| %s | %s vs %s | %.3f | %.2f | %s |' % (group_cells(g), a, b, q, goal, verdict(goal, [q])))
                continue
            q = med[g, a] / med[g, b]
            base = {r['round']: r['value'] for r in by[g, b]}
            per = sorted(r['value'] / base[r['round']] for r in by[g, a] if r['round'] in base)
            pm = statistics.median(per)
            extra = ''
            if with_cpu:
                extra = ' %s |' % ('%.3f' % (cpu_of[g, b] / cpu_of[g, a])
                                   if (g, a) in cpu_of and (g, b) in cpu_of else '-')
            print('| %s | %s / %s | %.3f | %.3f (%.2f-%.2f) | %.2f | %s |%s' % (
                group_cells(g), a, b, q, pm, per[0], per[-1], goal, verdict(goal, [q, pm]), extra))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, path, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cmd == 'latency':
        latency(path, rest)
    elif cmd in ('runs', 'cpu'):
        summary(path, rest, cmd == 'cpu')
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
