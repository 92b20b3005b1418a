#!/usr/bin/env python3
"""Checks a scrape of the exporter's /metrics (the metrics stage, test/stages/metrics.sh).

  check.py SCRAPE EXPECTED QUERIES ALERTS DASHBOARD

- every idem_* series of SCRAPE is in EXPECTED with its value, and every line of EXPECTED is in
  SCRAPE (the exporter's "server" label left out): exact values, or ">0" for an age;
- the idem_* metric names (their "# TYPE" lines, with the type) are those EXPECTED lists, and
  those the queries file QUERIES defines (prefix_column for each column that is not a LABEL);
- the exporter is up (pg_up 1), its last scrape had no error and it loaded the queries file;
- every idem_* name in the exprs of the alert rules ALERTS and of the Grafana dashboard
  DASHBOARD is a scraped metric.
Prints one line per problem; exits 1 when there is one.
"""
import json
import re
import sys

import yaml

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)$')
NAME = re.compile(r'\bidem_[a-z_]+\b')


def series_key(name, labels):
    pairs = sorted((k, v) for k, v in LABEL.findall(labels or '') if k != 'server')
    inner = ','.join(f'{k}="{v}"' for k, v in pairs)
    return f'{name}{{{inner}}}' if inner else name


def parse_scrape(text):
    samples, types = {}, set()
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            types.add(line)
        elif line and not line.startswith('#'):
            m = SAMPLE.match(line)
            if m:
                samples[series_key(m.group(1), m.group(2))] = m.group(3)
    return samples, types


def parse_expected(text):
    values, types = {}, set()
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            types.add(line)
        elif line.strip() and not line.startswith('#'):
            key, value = line.rsplit(' ', 1)
            m = SAMPLE.match(line)
            values[series_key(m.group(1), m.group(2)) if m else key] = value
    return values, types


def value_ok(want, got):
    try:
        number = float(got)
    except ValueError:
        return False
    return number > 0 if want == '>0' else number == float(want)


def queries_names(path):
    with open(path, encoding='utf-8') as f:
        queries = yaml.safe_load(f)
    names = set()
    for prefix, query in queries.items():
        for column in query['metrics']:
            ((name, spec),) = column.items()
            if spec['usage'] != 'LABEL':
                names.add(f'{prefix}_{name}')
    return names


def exprs_of_alerts(path):
    with open(path, encoding='utf-8') as f:
        rules = yaml.safe_load(f)
    return [r['expr'] for g in rules['groups'] for r in g['rules']]


def exprs_of_dashboard(path):
    with open(path, encoding='utf-8') as f:
        doc = json.load(f)
    found = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ('expr', 'query') and isinstance(v, str):
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    return found


def main(scrape_path, expected_path, queries_path, alerts_path, dashboard_path):
    with open(scrape_path, encoding='utf-8') as f:
        samples, types = parse_scrape(f.read())
    with open(expected_path, encoding='utf-8') as f:
        expected, expected_types = parse_expected(f.read())
    problems = []
    for key, want in sorted(expected.items()):
        if key not in samples:
            problems.append(f'missing: {key} (expected {want})')
        elif not value_ok(want, samples[key]):
            problems.append(f'wrong value: {key} {samples[key]} (expected {want})')
    for key in sorted(samples):
        if key.startswith('idem_') and key not in expected:
            problems.append(f'unexpected series: {key} {samples[key]}')
    load = [k for k in samples if k.startswith('pg_exporter_user_queries_load_error')]
    if len(load) != 1 or samples[load[0]] != '0':
        problems.append(f'queries file not loaded: {[(k, samples[k]) for k in load]}')
    scraped_types = {t for t in types if t.startswith('# TYPE idem_')}
    for t in sorted(expected_types - scraped_types):
        problems.append(f'metric missing or of another type: {t}')
    for t in sorted(scraped_types - expected_types):
        problems.append(f'metric not expected: {t}')
    expected_names = {t.split()[2] for t in expected_types}
    defined = queries_names(queries_path)
    for name in sorted(defined ^ expected_names):
        where = 'the queries file' if name in defined else 'test/metrics/expected.txt'
        problems.append(f'{name}: only in {where}')
    scraped_names = {t.split()[2] for t in scraped_types}
    for source, exprs in ((alerts_path, exprs_of_alerts(alerts_path)),
                          (dashboard_path, exprs_of_dashboard(dashboard_path))):
        for name in sorted({n for e in exprs for n in NAME.findall(e)} - scraped_names):
            problems.append(f'{source}: {name} is not a scraped metric')
    for p in problems:
        print(f'metrics check: {p}')
    checked = len(expected) + len(expected_types)
    print(f'metrics check: {checked} series and types expected, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
