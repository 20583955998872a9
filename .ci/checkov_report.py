"""Reads checkov's JSON report: fails on a failed check, a parsing error, or a scan that found
nothing; lists the skipped checks with their reasons.

Usage: checkov_report.py REPORT.json CHECKOV_EXIT_CODE
"""

import json
import sys

path, rc = sys.argv[1], int(sys.argv[2])
try:
    data = json.load(open(path))
except ValueError:
    print("bicep-check: checkov produced no JSON report", file=sys.stderr)
    sys.exit(1)
reports = data if isinstance(data, list) else [data]
bad = rc != 0
total = {"passed": 0, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 0}
for report in reports:
    summary = report.get("summary", {})
    for key in total:
        total[key] += int(summary.get(key, 0) or 0)
    results = report.get("results", {})
    for check in results.get("failed_checks", []):
        print(f"FAILED {check.get('check_id')} {check.get('resource')} "
              f"{check.get('file_path')}:{check.get('file_line_range')} {check.get('check_name')}")
    for check in results.get("skipped_checks", []):
        reason = (check.get("check_result") or {}).get("suppress_comment", "")
        print(f"skipped {check.get('check_id')} {check.get('resource')}: {reason}")
print("checkov: " + ", ".join(f"{k}={v}" for k, v in total.items()) + f", exit={rc}")
if total["failed"] or total["parsing_errors"] or total["resource_count"] == 0:
    bad = True
sys.exit(1 if bad else 0)
