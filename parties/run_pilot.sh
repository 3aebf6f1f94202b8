#!/usr/bin/env bash
# The bank-marketing pilot by hand: the same steps `vsplit pilot bank-marketing` runs, one command at a time.
# In a real pilot, the bank's commands run on the bank's machine and the partner's on the partner's; each
# organization sends only its certificate (.pem) to the other and both compare fingerprints by phone.
set -euo pipefail
cd "$(dirname "$0")/.."
VSPLIT=${VSPLIT:-.venv/bin/vsplit}
RUN_ID=${RUN_ID:-by-hand-$(date +%Y%m%d-%H%M%S)}

# 1. Each party's own data (here cut from the bundled UCI data set; in a pilot, each party's own export).
.venv/bin/python -c "
from pathlib import Path
from vsplit.datasets import preset
from vsplit.pilot.prepare import export_tables
export_tables(preset('bank_marketing'), Path('parties'))"

# 2. Keys: each party creates its own and prints the fingerprint to read out to the other organization.
for party in bank partner; do
  [ -f "parties/$party/keys/$party.pem" ] || "$VSPLIT" keys new --party "$party" --out "parties/$party/keys"
done
# 3. Pin the peer's certificate (received out of band; check its fingerprint with `vsplit keys show FILE`).
mkdir -p parties/bank/keys/peers parties/partner/keys/peers
cp parties/partner/keys/partner.pem parties/bank/keys/peers/partner.pem
cp parties/bank/keys/bank.pem parties/partner/keys/peers/bank.pem

# 4. Train: the bank listens, the partner dials; PSI, split training, test scoring, each party's model part saved.
"$VSPLIT" train --config parties/bank/party.toml --set output.run_id="$RUN_ID" &
bank=$!
"$VSPLIT" train --config parties/partner/party.toml --set output.run_id="$RUN_ID" --quiet
wait "$bank"

# 5. Batch prediction with the saved model parts: only the bank receives scores.
.venv/bin/python -c "
import pandas as pd
pd.read_parquet('parties/bank/data/test.parquet')[['customer_id']].to_csv('parties/bank/data/score_ids.csv', index=False)"
"$VSPLIT" predict --config parties/bank/party.toml --set output.run_id="$RUN_ID" \
  --input parties/bank/data/test.parquet --ids parties/bank/data/score_ids.csv &
bank=$!
"$VSPLIT" predict --config parties/partner/party.toml --set output.run_id="$RUN_ID" \
  --input parties/partner/data/test.parquet --quiet
wait "$bank"

# 6. The report (the pilot command also adds the centralized baseline, which needs the pooled data).
"$VSPLIT" report --run "runs/$RUN_ID" --check
