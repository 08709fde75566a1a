#!/usr/bin/env python3
"""Turns ctest's JUnit report (ctest --output-junit FILE) into a JSON list on stdout, one object
per test: {"name", "status": passed|failed|skipped, "seconds", "reason", "measured"}. A skipped
test's reason is GoogleTest's skip message (the line after "Skipped" in its output) or ctest's;
"measured" lists the "[ measured ] ..." lines a test printed (figures such as recovery times).

Usage: junit_to_json.py REPORT.xml
"""
import json
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    out = case.findtext("system-out") or ""
    # GoogleTest prints "<file>:<line>: Skipped\n<message>" for GTEST_SKIP() << message.
    m = re.search(r"Skipped\s*\n(.+)", out)
    if m:
        return m.group(1).strip()
    skipped = case.find("skipped")
    return (skipped.get("message") if skipped is not None else "") or ""


def rows(report):
    """The report's test cases as a list of the objects described above."""
    out_rows = []
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.get("status") == "fail":
            status, reason = "failed", (case.find("failure").get("message", "")
                                        if case.find("failure") is not None else "")
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            status, reason = "skipped", skip_reason(case)
        else:
            status, reason = "passed", ""
        out = case.findtext("system-out") or ""
        measured = [line.split("[ measured ]", 1)[1].strip() for line in out.splitlines()
                    if "[ measured ]" in line]
        out_rows.append({"name": case.get("name"), "status": status,
                         "seconds": float(case.get("time") or 0), "reason": reason,
                         "measured": measured})
    return out_rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    json.dump(rows(sys.argv[1]), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
