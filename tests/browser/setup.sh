#!/usr/bin/env bash
# Installs what the console's browser tests need, when missing: Debian's Chromium (the
# browser Playwright drives; Playwright's own browser downloads are not used) and the npm
# packages of package-lock.json (playwright-core alone).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v chromium > /dev/null; then
  echo "installing Debian's chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq > /dev/null
  apt-get install -y -qq --no-install-recommends chromium > /dev/null
fi
if [ ! -f node_modules/playwright-core/package.json ]; then
  echo "installing playwright-core (npm ci)" >&2
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent
fi
