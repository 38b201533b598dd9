"""kolorun's parts (tools/kolorun.py is the command line): where ranks go (hosts),
the socket world's launch (slots, processes, static_job), and the elastic driver
(discovery, registry, service, elastic_driver). Python standard library only, for
/usr/bin/python3; installed beside kolorun as share/kolo/kololaunch."""
