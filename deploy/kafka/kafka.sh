#!/usr/bin/env bash
# Single-node Apache Kafka 4.x broker (KRaft, broker+controller in one JVM) on 127.0.0.1,
# built from Maven Central jars, for tests and benchmarks.
#
#   kafka.sh provision                 resolve the broker jars into the cache (idempotent)
#   kafka.sh start  [options]          provision if needed, format, start, wait until ready;
#                                      prints the bootstrap address (127.0.0.1:PORT) on stdout
#   kafka.sh stop   [--dir DIR]        SIGTERM, wait, SIGKILL; idempotent
#   kafka.sh status [--dir DIR]        exit 0 if running, 3 if not
#   kafka.sh classpath                 print the broker classpath (provisions if needed)
#
# start options:
#   --port N              PLAINTEXT port (default 9092)
#   --controller-port N   KRaft controller port (default PORT+1)
#   --dir DIR             run dir: config/, data/, logs/, kafka.pid
#                         (default ${TMPDIR:-/tmp}/vfr-monitor-kafka)
#   --partitions N        num.partitions for auto-created topics (default 3)
#   --heap SIZE           -Xmx (default 512m)
#   --timeout SECONDS     readiness timeout (default 90)
#   --fresh               wipe DIR's data and logs first
#   --scram-port N        also open a SASL_SSL listener on 127.0.0.1:N with SCRAM-SHA-512:
#                         a self-signed PKCS12 keystore is made with keytool (SAN
#                         IP:127.0.0.1) and its certificate written to DIR/config/ca.pem for
#                         clients; the SCRAM user is created by the KRaft storage format
#                         (kafka-storage format --add-scram). PLAINTEXT stays for the
#                         controller, inter-broker traffic and the readiness check.
#   --scram-user NAME     SCRAM user (default vfr-monitor)
#   --scram-password-file FILE
#                         file holding the SCRAM user's password (required with
#                         --scram-port; the password is never taken on the command line)
#
# Environment:
#   KAFKA_VERSION      Kafka version to resolve (default below: the newest 4.x on Maven Central
#                      when this was written)
#   KAFKA_CACHE_DIR    jar cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/vfr-monitor/kafka-VERSION)
#   KAFKA_MAVEN_REPO   Maven local repository to use (default: Maven's own, ~/.m2/repository)
#   KAFKA_PYTHON       python with kafka-python for the readiness check (default: the repo's
#                      .venv/bin/python, else python3; without kafka-python the check is
#                      port open + "Kafka Server started" in the broker log)
#   KAFKA_JVM_OPTS     extra JVM options for the broker
#   KAFKA_STOP_TIMEOUT seconds to wait after SIGTERM before SIGKILL (default 30)
set -euo pipefail

readonly DEFAULT_KAFKA_VERSION="4.4.0"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly REPO_ROOT="${SCRIPT_DIR}/../.."
readonly KAFKA_VERSION="${KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}"
readonly CACHE_DIR="${KAFKA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vfr-monitor/kafka-${KAFKA_VERSION}}"
readonly LIB_DIR="${CACHE_DIR}/libs"
readonly MARKER="${CACHE_DIR}/.provisioned"
readonly MAIN_JAR="kafka_2.13-${KAFKA_VERSION}.jar"

DIR="${TMPDIR:-/tmp}/vfr-monitor-kafka"

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# --------------------------------------------------------------------------- prerequisites

java_major() {
    # "17.0.15" -> 17, "1.8" -> 8
    local v
    v="$(java -XshowSettings:properties -version 2>&1 \
        | awk -F'= ' '/java.specification.version/ {print $2; exit}')"
    v="${v#1.}"
    printf '%s\n' "${v%%.*}"
}

ensure_tools() {
    local need=()
    command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
    if [[ "${1:-}" == "mvn" ]]; then
        command -v mvn >/dev/null 2>&1 || need+=(maven)
    fi
    if ((${#need[@]})); then
        if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
            die "missing ${need[*]}: install Java 17+ and Maven (e.g. apt-get install -y ${need[*]})"
        fi
        log "installing ${need[*]} with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        # Debian releases without openjdk-17 (e.g. trixie: 21) get their default JRE instead.
        if [[ " ${need[*]} " == *" openjdk-17-jre-headless "* ]] \
            && ! apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
            need=("${need[@]/openjdk-17-jre-headless/default-jre-headless}")
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${need[@]}" >&2
    fi
    local major
    major="$(java_major)"
    if ! [[ "$major" =~ ^[0-9]+$ ]] || ((major < 17)); then
        die "Kafka ${KAFKA_VERSION} needs Java 17+, found '$(java -version 2>&1 | head -n1)'"
    fi
}

# --------------------------------------------------------------------------- shared helpers

classpath() {
    local cp="" jar
    for jar in "$LIB_DIR"/*.jar; do
        cp="${cp:+${cp}:}${jar}"
    done
    printf '%s\n' "$cp"
}

port_open() {
    # true if something accepts TCP connections on 127.0.0.1:$1
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

rss_mib() {
    local kb
    kb="$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true)"
    printf '%s\n' "$((${kb:-0} / 1024))"
}

# SIGTERM, wait up to $2 seconds, then SIGKILL.
stop_pid() {
    local pid="$1" grace="$2" waited=0
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && ((waited < grace * 4)); do
        sleep 0.25
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid ${pid} still alive after ${grace}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
}

random_cluster_id() {
    # Kafka Uuid: 16 random bytes, URL-safe base64 without padding (22 chars). Avoid a
    # leading '-' so the id can never be mistaken for a command-line option.
    local id
    while :; do
        id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
        [[ "$id" != -* && ${#id} -eq 22 ]] && break
    done
    printf '%s\n' "$id"
}

# listeners_line PORT CONTROLLER_PORT [SCRAM_PORT]: the listeners= line of server.properties.
listeners_line() {
    if [[ -n "${3:-}" ]]; then
        printf 'listeners=PLAINTEXT://127.0.0.1:%s,SASL_SSL://127.0.0.1:%s,CONTROLLER://127.0.0.1:%s\n' \
            "$1" "$3" "$2"
    else
        printf 'listeners=PLAINTEXT://127.0.0.1:%s,CONTROLLER://127.0.0.1:%s\n' "$1" "$2"
    fi
}

# write_server_properties FILE DATA_DIR PORT CONTROLLER_PORT PARTITIONS [SCRAM_PORT KEYSTORE PASS]
write_server_properties() {
    local listeners map
    listeners="$(listeners_line "$3" "$4" "${6:-}")"
    map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    [[ -z "${6:-}" ]] || map="PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    cat >"$1" <<EOF
# Written by deploy/kafka/kafka.sh (Kafka ${KAFKA_VERSION}); single-node KRaft, 127.0.0.1 only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$4
${listeners}
advertised.${listeners}
listener.security.protocol.map=${map}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$2
num.partitions=$5
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
# A local broker (demo, tests, benchmarks) keeps topics for ever: vfr-monitor refuses a
# topic kept shorter than its horizon (90 days by default; Kafka's default is 7).
log.retention.ms=-1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.recovery.threads.per.data.dir=1
EOF
    if [[ -n "${6:-}" ]]; then
        cat >>"$1" <<EOF
# SASL_SSL listener with SCRAM-SHA-512 (the user is created by the storage format)
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$7
listener.name.sasl_ssl.ssl.keystore.password=$8
listener.name.sasl_ssl.ssl.key.password=$8
EOF
    fi
}

# make_keystore CONFIG_DIR: self-signed PKCS12 keystore for 127.0.0.1 and its certificate as
# CONFIG_DIR/ca.pem; the store password is kept in CONFIG_DIR/keystore.pass (mode 600) so a
# restart of the same DIR writes the same server.properties. Reused when present.
make_keystore() {
    local dir="$1" pass
    if [[ ! -s "${dir}/keystore.pass" ]]; then
        (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"${dir}/keystore.pass")
    fi
    pass="$(cat "${dir}/keystore.pass")"
    if [[ ! -f "${dir}/broker.p12" ]]; then
        command -v keytool >/dev/null 2>&1 || die "--scram-port needs keytool (a JDK)"
        keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 30 \
            -dname "CN=127.0.0.1" -ext "SAN=ip:127.0.0.1,dns:localhost" \
            -keystore "${dir}/broker.p12" -storetype PKCS12 \
            -storepass "$pass" -keypass "$pass" >/dev/null 2>&1 \
            || die "keytool could not create ${dir}/broker.p12"
        chmod 600 "${dir}/broker.p12"
        keytool -exportcert -rfc -alias broker -keystore "${dir}/broker.p12" \
            -storepass "$pass" -file "${dir}/ca.pem" >/dev/null 2>&1 \
            || die "keytool could not export ${dir}/ca.pem"
    fi
}

# format_storage PROPS LOG_DIR [SCRAM_USER SCRAM_PASSWORD_FILE]: KRaft storage format (single
# voter, random cluster id), creating the SCRAM-SHA-512 user when one is given.
format_storage() {
    local props="$1" logdir="$2" cluster_id scram=()
    cluster_id="$(random_cluster_id)"
    if [[ -n "${3:-}" ]]; then
        local password
        password="$(head -n 1 "$4" | tr -d '\r\n')"
        [[ -n "$password" ]] || die "--scram-password-file $4 is empty"
        [[ "$password" != *[],=]* ]] || die "the SCRAM password may not contain ']', ',' or '='"
        scram=(--add-scram "SCRAM-SHA-512=[name=$3,password=${password}]")
    fi
    java -Xmx256m -XX:TieredStopAtLevel=1 "-XX:ErrorFile=${logdir}/hs_err_%p.log" \
        -cp "$(classpath)" \
        "-Dlog4j2.configurationFile=${SCRIPT_DIR}/log4j2.properties" "-Dkafka.logs.dir=${logdir}" \
        kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$props" "${scram[@]}" \
        >"${logdir}/format.log" 2>&1
}

# broker_jvm_opts HEAP LOG_DIR: sets the global array JVM_OPTS.
broker_jvm_opts() {
    JVM_OPTS=("-Xms128m" "-Xmx$1" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
        -XX:+ExitOnOutOfMemoryError "-XX:ErrorFile=$2/hs_err_%p.log" -Djava.awt.headless=true
        "-Dkafka.logs.dir=$2" "-Dlog4j2.configurationFile=${SCRIPT_DIR}/log4j2.properties")
}

# --------------------------------------------------------------------------- provision

is_provisioned() {
    [[ -f "$MARKER" && -f "${LIB_DIR}/${MAIN_JAR}" ]]
}

cmd_provision() {
    (($# == 0)) || die "provision takes no arguments (set KAFKA_VERSION / KAFKA_CACHE_DIR)"
    if is_provisioned; then
        log "Kafka ${KAFKA_VERSION} already provisioned in ${CACHE_DIR}"
        return 0
    fi
    ensure_tools mvn
    mkdir -p "$(dirname "$CACHE_DIR")"
    # Serialise concurrent provisions (e.g. parallel test sessions) on the same cache.
    exec 9>"${CACHE_DIR}.lock"
    flock 9
    if is_provisioned; then
        exec 9>&-
        log "Kafka ${KAFKA_VERSION} already provisioned in ${CACHE_DIR}"
        return 0
    fi
    log "resolving org.apache.kafka:kafka_2.13:${KAFKA_VERSION} and its runtime dependencies (mvn)"
    local tmp="${CACHE_DIR}.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp/libs"
    local mvn_args=(-B -q -Dstyle.color=never -f "${SCRIPT_DIR}/pom.xml"
        dependency:copy-dependencies "-Dkafka.version=${KAFKA_VERSION}" -DincludeScope=runtime
        "-DoutputDirectory=${tmp}/libs")
    if [[ -n "${KAFKA_MAVEN_REPO:-}" ]]; then
        mvn_args+=("-Dmaven.repo.local=${KAFKA_MAVEN_REPO}")
    fi
    if ! mvn "${mvn_args[@]}" >"${tmp}/mvn.log" 2>&1; then
        sed 's/\x1b\[[0-9;]*m//g' "${tmp}/mvn.log" | tail -n 30 >&2 || true
        rm -rf "$tmp"
        die "mvn could not resolve Kafka ${KAFKA_VERSION} from Maven Central (log above)"
    fi
    if [[ ! -f "${tmp}/libs/${MAIN_JAR}" ]]; then
        rm -rf "$tmp"
        die "mvn finished but ${MAIN_JAR} is missing"
    fi
    find "${tmp}/libs" -maxdepth 1 -name '*.jar' -printf '%f\n' | sort >"${tmp}/jars.txt"
    rm -f "${tmp}/mvn.log"
    printf 'kafka_version=%s\nprovisioned_at=%s\n' "$KAFKA_VERSION" "$(date -u +%FT%TZ)" \
        >"${tmp}/.provisioned"
    rm -rf "$CACHE_DIR"
    mv "$tmp" "$CACHE_DIR"
    exec 9>&-
    log "provisioned Kafka ${KAFKA_VERSION}: $(wc -l <"${CACHE_DIR}/jars.txt") jars," \
        "$(du -sh "$LIB_DIR" | cut -f1) in ${CACHE_DIR}"
}

cmd_classpath() {
    is_provisioned || cmd_provision >&2
    classpath
}

# --------------------------------------------------------------------------- run-dir helpers

pid_file() { printf '%s/kafka.pid\n' "$DIR"; }

# Prints the broker pid if DIR's broker is alive (and really is our kafka.Kafka process).
running_pid() {
    local pf pid
    pf="$(pid_file)"
    [[ -f "$pf" ]] || return 1
    pid="$(tr -dc '0-9' <"$pf")"
    [[ -n "$pid" ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r "/proc/${pid}/cmdline" ]]; then
        tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -qF "${DIR}/config/server.properties" || return 1
    fi
    printf '%s\n' "$pid"
}

find_python() {
    local py
    for py in "${KAFKA_PYTHON:-}" "${REPO_ROOT}/.venv/bin/python" python3; do
        [[ -n "$py" ]] || continue
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import kafka' >/dev/null 2>&1; then
            printf '%s\n' "$py"
            return 0
        fi
    done
    return 1
}

# Metadata round trip with kafka-python: the broker must list itself, unfenced.
metadata_ok() {
    local py="$1" bootstrap="$2"
    "$py" - "$bootstrap" <<'PY' >"${DIR}/logs/readiness.log" 2>&1
import sys

from kafka import KafkaAdminClient

admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], client_id="kafka.sh-readiness",
                         request_timeout_ms=5000, bootstrap_timeout_ms=5000)
try:
    brokers = admin.describe_cluster().get("brokers") or []
    print(brokers)
    sys.exit(0 if any(not b.get("is_fenced") for b in brokers) else 1)
finally:
    admin.close()
PY
}

broker_log_tail() {
    local f
    for f in "${DIR}/logs/server.log" "${DIR}/logs/stdout.log" "${DIR}/logs/readiness.log"; do
        if [[ -s "$f" ]]; then
            printf -- '----- tail of %s -----\n' "$f" >&2
            tail -n 40 "$f" >&2
        fi
    done
}

# --------------------------------------------------------------------------- start

cmd_start() {
    local port=9092 cport="" partitions=3 heap=512m timeout=90 fresh=0
    local sport="" suser="vfr-monitor" spassfile=""
    while (($#)); do
        case "$1" in
            --port) port="${2:?--port needs a value}"; shift 2 ;;
            --controller-port) cport="${2:?--controller-port needs a value}"; shift 2 ;;
            --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
            --partitions) partitions="${2:?--partitions needs a value}"; shift 2 ;;
            --heap) heap="${2:?--heap needs a value}"; shift 2 ;;
            --timeout) timeout="${2:?--timeout needs a value}"; shift 2 ;;
            --fresh) fresh=1; shift ;;
            --scram-port) sport="${2:?--scram-port needs a value}"; shift 2 ;;
            --scram-user) suser="${2:?--scram-user needs a value}"; shift 2 ;;
            --scram-password-file) spassfile="${2:?--scram-password-file needs a value}"; shift 2 ;;
            *) die "start: unknown option '$1' (see kafka.sh --help)" ;;
        esac
    done
    cport="${cport:-$((port + 1))}"
    local n
    for n in "$port" "$cport" "$partitions" "$timeout"; do
        [[ "$n" =~ ^[0-9]+$ ]] || die "start: '$n' is not a number"
    done
    ((port != cport)) || die "start: --port and --controller-port must differ"
    if [[ -n "$sport" ]]; then
        [[ "$sport" =~ ^[0-9]+$ ]] || die "start: '$sport' is not a number"
        ((sport != port && sport != cport)) || die "start: --scram-port must differ from the others"
        [[ -n "$spassfile" && -s "$spassfile" ]] \
            || die "start: --scram-port needs --scram-password-file (a non-empty file)"
        [[ "$suser" =~ ^[A-Za-z0-9._-]+$ ]] || die "start: --scram-user must be [A-Za-z0-9._-]+"
    fi
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd -P)"
    local props="${DIR}/config/server.properties"

    local pid
    if pid="$(running_pid)"; then
        grep -qxF "$(listeners_line "$port" "$cport" "$sport")" \
            "$props" || die "a broker with other ports is already running in ${DIR} (pid ${pid})"
        log "broker already running (pid ${pid}, dir ${DIR})"
        printf '127.0.0.1:%s\n' "$port"
        return 0
    fi

    is_provisioned || cmd_provision
    ensure_tools

    local p
    for p in "$port" "$cport" $sport; do
        if port_open "$p"; then
            die "port 127.0.0.1:${p} is already in use"
        fi
    done

    if ((fresh)); then
        rm -rf "${DIR}/data" "${DIR}/logs" "${DIR}/config"
    fi
    mkdir -p "${DIR}/config" "${DIR}/data" "${DIR}/logs"
    rm -f "${DIR}/logs/readiness.log"

    local tls_args=()
    if [[ -n "$sport" ]]; then
        make_keystore "${DIR}/config"
        tls_args=("$sport" "${DIR}/config/broker.p12" "$(cat "${DIR}/config/keystore.pass")")
    fi
    write_server_properties "${props}.new" "${DIR}/data" "$port" "$cport" "$partitions" \
        "${tls_args[@]}"
    if [[ -f "${DIR}/data/meta.properties" ]]; then
        # Existing storage: the KRaft voter endpoint is baked into it, so settings must match.
        if ! cmp -s "${props}.new" "$props"; then
            rm -f "${props}.new"
            die "${DIR} holds a broker formatted with different settings; use --fresh or another --dir"
        fi
        rm -f "${props}.new"
    else
        mv "${props}.new" "$props"
        log "formatting storage in ${DIR}/data"
        local scram_args=()
        [[ -z "$sport" ]] || scram_args=("$suser" "$spassfile")
        if ! format_storage "$props" "${DIR}/logs" "${scram_args[@]}"; then
            cat "${DIR}/logs/format.log" >&2
            die "kafka storage format failed"
        fi
    fi

    local JVM_OPTS=() extra=()
    broker_jvm_opts "$heap" "${DIR}/logs"
    if [[ -n "${KAFKA_JVM_OPTS:-}" ]]; then
        read -r -a extra <<<"$KAFKA_JVM_OPTS"
    fi

    log "starting Kafka ${KAFKA_VERSION} on 127.0.0.1:${port} (controller ${cport}, dir ${DIR})"
    local started_at=$SECONDS
    nohup java "${JVM_OPTS[@]}" "${extra[@]}" -cp "$(classpath)" kafka.Kafka "$props" \
        >"${DIR}/logs/stdout.log" 2>&1 </dev/null &
    pid=$!
    printf '%s\n' "$pid" >"$(pid_file)"

    local py="" have_py=0
    if py="$(find_python)"; then
        have_py=1
    else
        log "no python with kafka-python; readiness = port open + 'Kafka Server started' in log"
    fi
    local deadline=$((SECONDS + timeout))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$(pid_file)"
            broker_log_tail
            die "broker exited during start-up (see ${DIR}/logs)"
        fi
        if port_open "$port" && { [[ -z "$sport" ]] || port_open "$sport"; } \
            && grep -qs 'Kafka Server started' "${DIR}/logs/server.log" \
            && { ((have_py == 0)) || metadata_ok "$py" "127.0.0.1:${port}"; }; then
            break
        fi
        if ((SECONDS >= deadline)); then
            broker_log_tail
            stop_pid "$pid" 10
            rm -f "$(pid_file)"
            die "broker not ready after ${timeout}s (stopped it; see ${DIR}/logs)"
        fi
        sleep 0.2
    done
    log "ready: 127.0.0.1:${port} (pid ${pid}, $((SECONDS - started_at))s," \
        "RSS $(rss_mib "$pid") MiB)"
    if [[ -n "$sport" ]]; then
        log "SASL_SSL/SCRAM-SHA-512 on 127.0.0.1:${sport} for user ${suser};" \
            "CA certificate ${DIR}/config/ca.pem"
    fi
    printf '127.0.0.1:%s\n' "$port"
}

# --------------------------------------------------------------------------- stop / status

parse_dir_only() {
    local sub="$1"
    shift
    while (($#)); do
        case "$1" in
            --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
            *) die "${sub}: unknown option '$1'" ;;
        esac
    done
    if [[ -d "$DIR" ]]; then
        DIR="$(cd "$DIR" && pwd -P)"
    fi
}

cmd_stop() {
    parse_dir_only stop "$@"
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$(pid_file)"
        log "no broker running in ${DIR}"
        return 0
    fi
    local grace="${KAFKA_STOP_TIMEOUT:-30}"
    log "stopping broker pid ${pid} (SIGTERM, up to ${grace}s)"
    stop_pid "$pid" "$grace"
    rm -f "$(pid_file)"
    log "stopped"
}

cmd_status() {
    parse_dir_only status "$@"
    local pid
    if pid="$(running_pid)"; then
        local props="${DIR}/config/server.properties" listeners version
        listeners="$(sed -n 's/^listeners=//p' "$props" 2>/dev/null || true)"
        version="$(sed -n '1s/.*(Kafka \([^)]*\)).*/\1/p' "$props" 2>/dev/null || true)"
        printf 'running pid=%s rss_mib=%s kafka=%s dir=%s listeners=%s\n' \
            "$pid" "$(rss_mib "$pid")" "$version" "$DIR" "$listeners"
        return 0
    fi
    if is_provisioned; then
        printf 'stopped dir=%s (Kafka %s provisioned in %s)\n' "$DIR" "$KAFKA_VERSION" "$CACHE_DIR"
    else
        printf 'stopped dir=%s (Kafka %s not provisioned)\n' "$DIR" "$KAFKA_VERSION"
    fi
    return 3
}

main() {
    local cmd="${1:-}"
    (($#)) && shift
    case "$cmd" in
        provision) cmd_provision "$@" ;;
        start) cmd_start "$@" ;;
        stop) cmd_stop "$@" ;;
        status) cmd_status "$@" ;;
        classpath) cmd_classpath "$@" ;;
        -h | --help | help) usage ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
}

main "$@"
