"""Medians and ratios of bench/long_session.sh's measurements (read from stdin)."""
import statistics
import sys

rows = {}
for line in sys.stdin:
    mode, ms, kib, detail = line.split()
    rows.setdefault(mode, []).append((float(ms), int(kib), float(detail)))


def med(mode, index):
    return statistics.median(row[index] for row in rows[mode])


items = int(sys.argv[1])
select_ms, select_mib = med("select", 0), med("select", 1) / 1024
resume_ms, resume_mib = med("resume", 0), med("resume", 1) / 1024
commit_ms = med("compact", 2)
print(f"long session: {items} items, medians of {len(rows['select'])} runs")
print(f"  plain SELECT of the rows   {select_ms:8.1f} ms  peak {select_mib:5.1f} MiB")
print(f"  keel resume + projection   {resume_ms:8.1f} ms  peak {resume_mib:5.1f} MiB"
      f"  (request {med('resume', 2) / 1e6:.1f} MB)")
print(f"  ratio resume / SELECT      {resume_ms / select_ms:8.2f} x time, "
      f"{resume_mib / select_mib:.2f} x memory")
compact_mib = med("compact", 1) / 1024
print(f"  one compaction commit      {commit_ms:8.1f} ms  ({commit_ms / select_ms:.2f} x the SELECT)")
print(f"  its process (read the history, then commit)  peak {compact_mib:5.1f} MiB"
      f"  ({compact_mib / select_mib:.2f} x the SELECT)")
