#!/usr/bin/env bash
# Re-render the README's topology pictures from the real fixtures (run from the repo root
# after `make setup`; the fixtures live in ../shared/fixtures/topology).
set -euo pipefail
F=../shared/fixtures/topology
DLC=.venv/bin/dlc
picture() {  # name fixture [p2p fixture]
    local extra=()
    [ $# -gt 2 ] && extra=(--p2p-file "$F/$3")
    "$DLC" topology --from-file "$F/$2" "${extra[@]}" --png "docs/images/topology-$1.png" --json >/dev/null
}
picture dgx1-v100 dgx1-v100_nv1-nv2_mlx5_oneflow.txt
picture hgx-h100 hgx-h100_nv18_gpu-numa-id_thunderkittens.txt
picture pcie-8gpu-bridge-pairs pcie-8gpu_nv12-bridge-pairs_non-adjacent_all-sys_tabs_k8s-dp-546.txt
picture rtx5090-pair rtx5090-2gpu_phb_tabs.txt rtx5090-2gpu_phb_tabs.p2p.txt
# AMD machines from the saved rocm-smi / amd-smi outputs in tests/fixtures/amd (SOURCES.md)
A=tests/fixtures/amd
"$DLC" topology --from-file "$A/mi300x-8gpu_amd-smi-topology-static_CONSTRUCTED.json" \
    --png docs/images/topology-mi300x.png --json >/dev/null
"$DLC" topology --from-file "$A/mi250-8gcd_shownodesbw_toponuma_optimum-amd.txt" \
    --png docs/images/topology-mi250x.png --json >/dev/null

# The terminal report, recorded by rich and drawn with a monospace font.
.venv/bin/python - "$F/dgx1-v100_nv1-nv2_mlx5_oneflow.txt" <<'PY'
import io
import re
import sys

import cairosvg
from rich.console import Console

from dlc.topology.discovery.discover import discover
from dlc.topology.render.report import analyze, render_report

console = Console(width=100, record=True, force_terminal=True, color_system="truecolor",
                  file=io.StringIO())
render_report(analyze(discover(from_file=sys.argv[1])), console)
svg = console.export_svg(title="dlc topology --from-file dgx1-v100_nv1-nv2_mlx5_oneflow.txt")
# No web fonts here (and no network): use the installed DejaVu Sans Mono.
svg = re.sub(r"@font-face \{.*?\}", "", svg, flags=re.S)
svg = svg.replace("Fira Code, monospace", "DejaVu Sans Mono")
cairosvg.svg2png(bytestring=svg.encode(), write_to="docs/images/topology-report-dgx1-v100.png",
                 scale=0.75)
PY
ls -l docs/images/*.png
