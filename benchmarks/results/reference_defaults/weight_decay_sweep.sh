#!/bin/bash
# Splits 0 of four datasets at four precisions; then splits 1 (and both of wine-quality-red) at 1
# and 10 (run the loop again with those datasets and "1 10").
for ds in yacht_0 concrete_0 boston_0 energy_0; do
  for wd in 1 3 10 30; do
    start=$(date +%s)
    bnnkit reference --dataset $ds --model mlp_regression_small --weight-decay $wd --members 4 --dir ${ds}_wd$wd --no-progress --json > ${ds}_wd$wd.json 2> ${ds}_wd$wd.err
    echo "$ds wd=$wd $(( $(date +%s) - start )) s" >> times.txt
  done
done
echo done >> times.txt
