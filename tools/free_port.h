/*
 * free_port.h - a port on 127.0.0.1 that is free at the moment, for a
 * listener started right after (shemb-run's rendezvous, the tests').
 */
#ifndef SHEMB_TOOL_FREE_PORT_H
#define SHEMB_TOOL_FREE_PORT_H

/*
 * Chosen at random below the range the kernel gives outgoing connections
 * (ip_local_port_range), so that no connection on the host takes it in
 * between; any free port the kernel gives when that range leaves no room
 * below it.  0 if none could be bound.
 */
unsigned shemb_tool_free_port(void);

/*
 * A socket listening at such a port (close-on-exec), the port in *port;
 * -1 if none could be bound.  Handed to rank 0 as SHEMB_ROOT_FD, it leaves
 * no moment at which another program could take the port.
 */
int shemb_tool_listen_free_port(unsigned *port);

#endif
