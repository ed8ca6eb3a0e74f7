# The report's browser test: Debian's chromium driven by npm's playwright-core.
mkdir -p /opt/rlprof-node
(cd /opt/rlprof-node && npm install --no-audit --no-fund --silent playwright-core >/dev/null)
export NODE_PATH=/opt/rlprof-node/node_modules
cargo test --release -p rlprof-report --test browser -- --ignored
