#!/usr/bin/env bash
# Formats the whole tree with Biome (biome.json: 2 spaces, single quotes, semicolons, width 160), then checks it
# the way `npm test` does. Run once after a merge that brings in unformatted code; `npm run format` is the same
# first step for day-to-day use.
# The formatter runs twice: Biome 2.6.8 settles some long member chains (`h.client(k).chat.completions.create(...)`)
# only on its second pass, and `biome ci` compares against the settled form.
set -euo pipefail
cd "$(dirname "$0")/.."
npx biome format --write .
npx biome format --write .
npx biome check --error-on-warnings .
