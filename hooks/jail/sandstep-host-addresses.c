/* sandstep-host-addresses.c: see sandstep-host-addresses.h. */
#include "sandstep-host-addresses.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/route.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* <linux/ipv6_route.h>'s, which clashes with the libc headers above. */
struct sandstep_in6_rtmsg {
  struct in6_addr rtmsg_dst;
  struct in6_addr rtmsg_src;
  struct in6_addr rtmsg_gateway;
  uint32_t rtmsg_type;
  uint16_t rtmsg_dst_len;
  uint16_t rtmsg_src_len;
  uint32_t rtmsg_metric;
  unsigned long rtmsg_info;
  uint32_t rtmsg_flags;
  int rtmsg_ifindex;
};

#define SANDSTEP_RTN_UNREACHABLE 7

int
sandstep_host_addresses_read (SandstepHostAddresses *out)
{
  struct ifaddrs *all, *a;
  int r = 0;

  out->n4 = out->n6 = 0;
  if (getifaddrs (&all) < 0)
    return -1;
  for (a = all; a != NULL && r == 0; a = a->ifa_next)
    {
      if (a->ifa_addr == NULL)
        continue;
      if (a->ifa_addr->sa_family == AF_INET)
        {
          struct in_addr addr = ((struct sockaddr_in *) a->ifa_addr)->sin_addr;
          /* 127/8 is the sandbox's own loopback. */
          if ((ntohl (addr.s_addr) >> 24) == 127)
            continue;
          if (out->n4 == SANDSTEP_HOST_ADDRESSES_MAX)
            r = -1;
          else
            out->v4[out->n4++] = addr;
        }
      else if (a->ifa_addr->sa_family == AF_INET6)
        {
          struct in6_addr addr = ((struct sockaddr_in6 *) a->ifa_addr)->sin6_addr;
          if (IN6_IS_ADDR_LOOPBACK (&addr) || IN6_IS_ADDR_LINKLOCAL (&addr))
            continue;
          if (out->n6 == SANDSTEP_HOST_ADDRESSES_MAX)
            r = -1;
          else
            out->v6[out->n6++] = addr;
        }
    }
  freeifaddrs (all);
  if (r < 0)
    errno = E2BIG;
  return r;
}

/* On @fd, a socket of the route's family; the same address twice (two interfaces) is one route. */
static int
add_route (int fd, void *route)
{
  return ioctl (fd, SIOCADDRT, route) < 0 && errno != EEXIST ? -1 : 0;
}

int
sandstep_host_addresses_unroute (const SandstepHostAddresses *addresses)
{
  int fd4 = -1, fd6 = -1, r = 0, errsv = 0;
  /* IPv6 takes a reject route through an interface's: the loopback's, which is up by now. */
  int lo = addresses->n6 > 0 ? (int) if_nametoindex ("lo") : 0;

  if ((addresses->n4 > 0 && (fd4 = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) ||
      (addresses->n6 > 0 && (fd6 = socket (AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0))
    r = -1;
  for (uint32_t i = 0; r == 0 && i < addresses->n4; i++)
    {
      struct rtentry route = { .rt_flags = RTF_UP | RTF_HOST | RTF_REJECT };
      struct sockaddr_in *dst = (struct sockaddr_in *) &route.rt_dst;
      dst->sin_family = AF_INET;
      dst->sin_addr = addresses->v4[i];
      r = add_route (fd4, &route);
    }
  for (uint32_t i = 0; r == 0 && i < addresses->n6; i++)
    {
      struct sandstep_in6_rtmsg route = {
        .rtmsg_dst = addresses->v6[i], .rtmsg_dst_len = 128, .rtmsg_metric = 1,
        .rtmsg_type = SANDSTEP_RTN_UNREACHABLE, .rtmsg_flags = RTF_UP | RTF_HOST | RTF_REJECT, .rtmsg_ifindex = lo,
      };
      r = add_route (fd6, &route);
    }
  if (r < 0)
    errsv = errno;
  if (fd4 >= 0)
    close (fd4);
  if (fd6 >= 0)
    close (fd6);
  errno = errsv;
  return r;
}
