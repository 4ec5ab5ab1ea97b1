# Sourced by the bench scripts: helpers they share.

# Waits until something listens on 127.0.0.1:PORT (up to TRIES tenths of a second, default 100).
wait_port() { for _ in $(seq "${2:-100}"); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
