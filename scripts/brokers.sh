#!/usr/bin/env bash
# Test brokers for the notification suite, on loopback only: Apache Kafka in KRaft mode
# (one combined broker+controller, jars from Maven Central) and RabbitMQ (Debian package,
# run by hand without systemd). Everything lives under $SHOAL_BROKERS (default
# ~/.cache/shoal/brokers); processes are stopped by the PIDs recorded there.
#
# Usage: scripts/brokers.sh install | start | stop
#   install: apt packages (openjdk, maven, rabbitmq-server) and the Kafka jars (cached)
#   start:   both brokers; prints KAFKA_PORT=… AMQP_PORT=… for the caller to eval
set -euo pipefail

DIR=${SHOAL_BROKERS:-$HOME/.cache/shoal/brokers}
KAFKA_VERSION=4.3.1
KAFKA_PORT=${SHOAL_KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${SHOAL_KAFKA_CONTROLLER_PORT:-19093}
AMQP_PORT=${SHOAL_AMQP_PORT:-15672}
AMQP_DIST_PORT=${SHOAL_AMQP_DIST_PORT:-25673}
RABBIT=/usr/lib/rabbitmq/bin/rabbitmq-server
K=$DIR/kafka
R=$DIR/rabbit

say() { echo "[brokers] $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 "$2"); do port_open "$1" && return 0; sleep 1; done
  return 1
}

install() {
  local pkgs=()
  command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || pkgs+=(maven)
  [ -x "$RABBIT" ] || pkgs+=(rabbitmq-server)
  if [ ${#pkgs[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends "${pkgs[@]}"
  fi
  if [ ! -f "$K/lib/kafka_2.13-$KAFKA_VERSION.jar" ]; then
    mkdir -p "$K"
    cat > "$K/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shoal.test</groupId><artifactId>kafka-broker</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.4</version></dependency>
  </dependencies>
</project>
POM
    (cd "$K" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime)
  fi
}

start_kafka() {
  if [ -f "$K/pid" ] && kill -0 "$(cat "$K/pid")" 2>/dev/null; then return 0; fi
  rm -rf "$K/data" && mkdir -p "$K/data"
  cat > "$K/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$K/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
  printf 'rootLogger.level=WARN\nrootLogger.appenderRef.f.ref=F\nappender.f.type=File\nappender.f.name=F\nappender.f.fileName=%s/server.log\nappender.f.layout.type=PatternLayout\nappender.f.layout.pattern=[%%d] %%p %%m%%n\n' "$K" > "$K/log4j2.properties"
  local java=(java -Xms128m -Xmx512m "-Dlog4j2.configurationFile=$K/log4j2.properties" -cp "$K/lib/*")
  "${java[@]}" kafka.tools.StorageTool format -t "$("${java[@]}" kafka.tools.StorageTool random-uuid | tail -1)" \
    -c "$K/server.properties" >/dev/null
  nohup "${java[@]}" kafka.Kafka "$K/server.properties" > "$K/out.log" 2>&1 &
  echo $! > "$K/pid"
  wait_port "$KAFKA_PORT" 120 || { say "kafka did not start; see $K/out.log"; return 1; }
}

start_rabbit() {
  if [ -f "$R/beam.pid" ] && kill -0 "$(cat "$R/beam.pid")" 2>/dev/null; then return 0; fi
  rm -rf "$R" && mkdir -p "$R/mnesia" "$R/log"
  printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users.guest = true\n' "$AMQP_PORT" > "$R/rabbitmq.conf"
  echo '[].' > "$R/enabled_plugins"
  ( export HOME="$R" RABBITMQ_NODENAME=shoal@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
      RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$AMQP_DIST_PORT" ERL_EPMD_ADDRESS=127.0.0.1 \
      RABBITMQ_MNESIA_BASE="$R/mnesia" RABBITMQ_LOG_BASE="$R/log" RABBITMQ_CONFIG_FILE="$R/rabbitmq.conf" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$R/enabled_plugins" RABBITMQ_PID_FILE="$R/beam.pid" \
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
    nohup "$RABBIT" > "$R/out.log" 2>&1 & )
  wait_port "$AMQP_PORT" 120 || { say "rabbitmq did not start; see $R/out.log"; return 1; }
}

stop_pid() {
  [ -f "$1" ] || return 0
  local pid; pid=$(cat "$1")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

case "${1:-}" in
  install) install ;;
  start) start_kafka; start_rabbit; echo "SHOAL_KAFKA_PORT=$KAFKA_PORT SHOAL_AMQP_PORT=$AMQP_PORT" ;;
  stop) stop_pid "$K/pid"; stop_pid "$R/beam.pid" ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
