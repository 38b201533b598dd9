# A TCP round trip of 32 bytes between two pretend hosts, 2000 times (TCP_NODELAY):
#   tools/pretend_cluster.sh --hosts 2 --rate 1gbit --command -- sh -c \
#     '"$KOLO_CLUSTER_ENTER" h2 /usr/bin/python3 tcp_round_trip.py server 10.77.0.2 & sleep 1;
#      "$KOLO_CLUSTER_ENTER" h1 /usr/bin/python3 tcp_round_trip.py client 10.77.0.2; wait'
import socket, sys, time, statistics
role, host = sys.argv[1], sys.argv[2]
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, 29999)); s.listen(1)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(64)
        if not d: break
        c.sendall(d)
else:
    for _ in range(50):
        try:
            c = socket.create_connection((host, 29999)); break
        except OSError: time.sleep(0.1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ts = []
    for i in range(2000):
        t = time.perf_counter(); c.sendall(b"x" * 32); c.recv(64); ts.append((time.perf_counter() - t) * 1e6)
    ts.sort(); print("rtt us median %.1f p10 %.1f p90 %.1f" % (ts[1000], ts[200], ts[1800]))
