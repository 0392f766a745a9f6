#!/bin/sh
# The same training run as train.py for images without Python (dlc-test/busybox:1): fit
# y = 3x + 1 by gradient descent in awk and save the model to /outputs/model.txt.
EPOCHS=${EPOCHS:-200}
OUT=/outputs; [ -d "$OUT" ] || OUT=outputs; mkdir -p "$OUT"
echo "GPUs on the host: $DLC_GPU_IDS (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)"
awk -v epochs="$EPOCHS" -v out="$OUT/model.txt" 'BEGIN {
  n = 0; for (x = -20; x <= 20; x++) { X[n] = x / 10; Y[n] = 3 * x / 10 + 1; n++ }
  w = 0.5; b = 0.5
  for (e = 0; e < epochs; e++) {
    gw = 0; gb = 0
    for (i = 0; i < n; i++) { d = w * X[i] + b - Y[i]; gw += 2 * d * X[i] / n; gb += 2 * d / n }
    w -= 0.1 * gw; b -= 0.1 * gb
  }
  loss = 0; for (i = 0; i < n; i++) { d = w * X[i] + b - Y[i]; loss += d * d / n }
  printf "trained on awk for %d epochs: w=%.3f b=%.3f loss=%.6f\n", epochs, w, b, loss
  printf "w=%.3f b=%.3f\n", w, b > out
}'
