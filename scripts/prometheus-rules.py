#!/usr/bin/env python3
"""Prints the plain Prometheus rule file (`groups:`, for `rule_files:` in prometheus.yml) of
deploy/prometheus/prometheusrule.yaml, the one source of the gateway's rules.

  python3 scripts/prometheus-rules.py deploy/prometheus/prometheusrule.yaml > rules.yaml
  python3 scripts/prometheus-rules.py --selector 'job="inspection-gateway"' ... > rules.yaml

--selector replaces the source's deployment selector, the matcher job!="" (any scrape job),
with your own label matchers. Needs PyYAML."""

import argparse
import sys

import yaml

# The matcher every selector of the source carries, and that --selector (and the chart's
# prometheusRule.selector) replaces.
SELECTOR = 'job!=""'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="deploy/prometheus/prometheusrule.yaml")
    parser.add_argument("--selector", default=SELECTOR,
                        help='label matchers that select the gateway, e.g. job="gw", namespace="x"')
    args = parser.parse_args()
    text = open(args.source, encoding="utf-8").read()
    if SELECTOR not in text:
        sys.exit(f"{args.source}: no {SELECTOR} selector to replace")
    document = yaml.safe_load(text.replace(SELECTOR, args.selector))
    if document.get("kind") != "PrometheusRule":
        sys.exit(f"{args.source}: not a PrometheusRule")
    sys.stdout.write("# Generated from deploy/prometheus/prometheusrule.yaml by "
                     "scripts/prometheus-rules.py: edit the source, not this file.\n")
    yaml.safe_dump({"groups": document["spec"]["groups"]}, sys.stdout, sort_keys=False,
                   width=1000, allow_unicode=True)


if __name__ == "__main__":
    main()
