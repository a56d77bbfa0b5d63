import socket, sys, time
# Opens 250 connections to each port given (half silent, half sending junk), holds
# them 5 s. Run as another user by tests/security/run.sh.
ports = [int(p) for p in sys.argv[1:]]
held=[]
for p in ports:
    for i in range(250):
        try:
            s=socket.create_connection(("127.0.0.1",p),timeout=2)
            if i%2==0: s.send(b"GET / HTTP/1.0\r\n\r\n"+b"x"*40)
            held.append(s)
        except Exception as e:
            pass
print("flood: opened",len(held),flush=True)
time.sleep(5)
