/* sandstep-init.c: pid 1 of a live sandbox.
 *
 *   sandstep-init CONTROL-FD [EGRESS-FD]
 *
 * Linked statically and kept free of libraries: it is exec'd once per
 * sandbox by the jail's child, as the last step after every restriction is
 * in place, so each command it starts inherits them all.  It starts the
 * commands the supervisor sends (sandstep-jail-init.h), each as a fresh
 * process tree; several only when asked to run them beside each other.  As
 * pid 1 it adopts every orphan, so when the last command's main process
 * ends (or the supervisor says KILL), init kills every other process of the
 * sandbox and reaps them all before it reports the status, and removes the
 * SysV IPC objects and /dev/shm files they left before it reads the next
 * command: no process or IPC object of a command outlives the commands.  A
 * command that ends while others run takes only its process group with it.  Nothing inside can kill
 * init (the kernel ignores a signal to a namespace's init that has no
 * handler), and when the supervisor goes, init goes, and the sandbox with it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-jail-init.h"
#include "sandstep-remove-libc.h"

#ifndef SHM_STAT_ANY
#define SHM_STAT_ANY 15
#endif
#ifndef SEM_STAT_ANY
#define SEM_STAT_ANY 20
#endif
#ifndef MSG_STAT_ANY
#define MSG_STAT_ANY 13
#endif

union semun {
  int val;
  struct semid_ds *buf;
  unsigned short *array;
  struct seminfo *__buf;
};

static int
listen_loopback (int port)
{
  struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons (port),
                                 .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int one = 1;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  if (fd < 0 || setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind (fd, (struct sockaddr *) &address, sizeof address) < 0 || listen (fd, 64) < 0)
    return -1;
  return fd;
}

static int
exit_status (int status)
{
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}

static void
say (int control, int32_t kind, int32_t status, int32_t error, int32_t id)
{
  SandstepInitMessage message = { .kind = kind, .status = status, .error = error, .id = id };

  while (send (control, &message, sizeof message, MSG_NOSIGNAL) < 0 && errno == EINTR)
    ;
}

/* Every SysV IPC object there is: after a command, only what it left. */
static void
remove_ipc (void)
{
  struct shm_info shm_info;
  struct seminfo sem_info;
  struct msginfo msg_info;
  int max;

  max = shmctl (0, SHM_INFO, (struct shmid_ds *) &shm_info);
  for (int i = 0; max >= 0 && shm_info.used_ids > 0 && i <= max; i++)
    {
      struct shmid_ds ds;
      int id = shmctl (i, SHM_STAT_ANY, &ds);
      if (id >= 0)
        shmctl (id, IPC_RMID, NULL);
    }
  max = semctl (0, 0, SEM_INFO, (union semun) { .__buf = &sem_info });
  for (int i = 0; max >= 0 && sem_info.semusz > 0 && i <= max; i++)
    {
      struct semid_ds ds;
      int id = semctl (i, 0, SEM_STAT_ANY, (union semun) { .buf = &ds });
      if (id >= 0)
        semctl (id, 0, IPC_RMID);
    }
  max = msgctl (0, MSG_INFO, (struct msqid_ds *) &msg_info);
  for (int i = 0; max >= 0 && msg_info.msgpool > 0 && i <= max; i++)
    {
      struct msqid_ds ds;
      int id = msgctl (i, MSG_STAT_ANY, &ds);
      if (id >= 0)
        msgctl (id, IPC_RMID, NULL);
    }
}

/* POSIX shared memory and semaphores are files in /dev/shm: like SysV IPC,
 * nothing of a command's outlives it (and its memory stays charged). */
static void
remove_shm (void)
{
  int fd = open ("/dev/shm", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd >= 0)
    {
      /* Without recursion: a command may leave a chain of directories deeper than init's stack. */
      sandstep_empty_directory (fd);
      close (fd);
    }
}

/* Kills every process of the sandbox but init, and reaps them all; returns
 * @command's wait status when it is among them. */
static int
end_everything (pid_t command, int *out_status)
{
  int found = 0;

  /* One kill(-1) reaches every process: a fork racing it fails, since its parent already has SIGKILL pending. */
  kill (-1, SIGKILL);
  for (;;)
    {
      int status;
      pid_t pid = waitpid (-1, &status, 0);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid < 0)
        break;
      if (pid == command)
        {
          *out_status = status;
          found = 1;
        }
    }
  return found;
}

typedef struct {
  char **strings;   /* the allocation .argv, .envp and .direct point into */
  char **argv;      /* into .buf */
  char **envp;
  char **direct;    /* the words to try first, or NULL */
  char *buf;
  int fds[3];
  int own_group;    /* beside others: in a process group of its own */
} Command;

static void
command_clear (Command *command)
{
  for (int i = 0; i < 3; i++)
    if (command->fds[i] >= 0)
      close (command->fds[i]);
  free (command->strings);
  free (command->buf);
  memset (command, 0, sizeof *command);
  command->fds[0] = command->fds[1] = command->fds[2] = -1;
}

/* One message on @control: the header, argc, the arguments and the
 * environment, with three fds.  0 at EOF, -1 on a bad message. */
static int
receive (int control, SandstepInitMessage *header, Command *command)
{
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  struct iovec iov[2];
  struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg;
  ssize_t size, n;
  char *p, *end;
  int argc, n_strings = 0;

  do
    size = recv (control, NULL, 0, MSG_PEEK | MSG_TRUNC);
  while (size < 0 && errno == EINTR);
  if (size <= 0)
    return size == 0 ? 0 : -1;
  if ((size_t) size < sizeof *header || (command->buf = malloc (size - sizeof *header + 1)) == NULL)
    {
      recv (control, header, sizeof *header, 0);
      return -1;
    }
  iov[0] = (struct iovec) { header, sizeof *header };
  iov[1] = (struct iovec) { command->buf, size - sizeof *header };
  do
    n = recvmsg (control, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != size)
    return -1;
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL; cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      {
        size_t count = (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t i = 0; i < count; i++)
          {
            int fd;
            memcpy (&fd, CMSG_DATA (cmsg) + i * sizeof (int), sizeof fd);
            if (i < 3 && command->fds[i] < 0)
              command->fds[i] = fd;
            else
              close (fd);
          }
      }
  if (header->kind != SANDSTEP_INIT_RUN)
    return 1;
  if (command->fds[0] < 0 || command->fds[1] < 0 || command->fds[2] < 0)
    return -1;

  size -= sizeof *header;
  command->buf[size] = '\0';
  end = command->buf + size;
  argc = atoi (command->buf);
  for (p = command->buf + strlen (command->buf) + 1; p < end; p += strlen (p) + 1)
    n_strings++;
  if (argc < 1 || argc > n_strings || (command->strings = calloc (n_strings + 2, sizeof (char *))) == NULL)
    return -1;
  command->argv = command->strings;
  command->envp = command->argv + argc + 1;
  p = command->buf + strlen (command->buf) + 1;
  for (int i = 0; i < n_strings; i++, p += strlen (p) + 1)
    if (i < argc)
      command->argv[i] = p;
    else
      command->envp[i - argc] = p;

  /* "--try WORD... --": exec the words as a shell would run that simple command, else what follows. */
  if (strcmp (command->argv[0], "--try") == 0)
    {
      char **a = command->argv + 1;
      command->direct = a;
      while (*a != NULL && strcmp (*a, "--") != 0)
        a++;
      if (*a == NULL || a[1] == NULL)
        return -1;
      *a = NULL;
      command->argv = a + 1;
    }
  return 1;
}

/* Every signal's disposition back to its default: one left ignored by
 * whoever started us would pass to every command.  Through the system call,
 * since libc refuses the signals it keeps for itself (32 to 34), which a
 * glibc posix_spawn leaves ignored; init has no threads to use them. */
static void
reset_dispositions (void)
{
  struct { void (*handler) (int); unsigned long flags; void (*restorer) (void); unsigned long mask; } dfl = {
    .handler = SIG_DFL,
  };

  for (int sig = 1; sig <= 64; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      syscall (SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
}

/* What a command's child says back through memory it shares with init. */
typedef struct {
  const Command *command;
  int error;
} Child;

/* The command's environment's PATH, as its shell would search it. */
static const char *
command_path (char **envp)
{
  for (char **e = envp; *e != NULL; e++)
    if (strncmp (*e, "PATH=", 5) == 0)
      return *e + 5;
  return "/usr/local/bin:/usr/bin:/bin";
}

/* execvpe in system calls only: @words[0] through the command's own PATH.
 * It returns when nothing ran, and the caller's fallback, the shell, says why. */
static void
exec_searching (char **words, char **envp)
{
  const char *path = command_path (envp), *dir, *end;
  size_t len = strlen (words[0]);
  char file[4096];

  if (strchr (words[0], '/') != NULL)
    {
      execve (words[0], words, envp);
      return;
    }
  for (dir = path;; dir = end + 1)
    {
      size_t dir_len;
      end = strchr (dir, ':');
      if (end == NULL)
        end = dir + strlen (dir);
      dir_len = end - dir;
      if (dir_len + 1 + len < sizeof file)
        {
          memcpy (file, dir, dir_len);
          file[dir_len] = '/';
          memcpy (file + (dir_len > 0 ? dir_len + 1 : 0), words[0], len + 1);
          execve (dir_len > 0 ? file : words[0], words, envp);
          /* As execvpe: only a file that is not there, or not ours to run, sends the search on; anything
           * else (a script without #!, a busy text) is the shell's to answer, for that very file. */
          if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV && errno != ETIMEDOUT &&
              errno != EACCES)
            return;
        }
      if (*end == '\0')
        return;
    }
}

/* Between clone and exec, on init's memory and stack: system calls only. */
static int
child_main (void *data)
{
  Child *child = data;
  const Command *command = child->command;
  uint64_t none = 0;

  for (int i = 0; i < 3; i++)
    if ((command->fds[i] == i ? fcntl (i, F_SETFD, 0) : dup2 (command->fds[i], i)) < 0)
      {
        child->error = errno;
        syscall (SYS_exit, 127);
      }
  syscall (SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
  /* Beside others, a group of its own: what KILL and its end take.  The first stays in init's, so that it may
   * still make a session of its own, which a group leader may not. */
  if (command->own_group && setpgid (0, 0) < 0)
    {
      child->error = errno;
      syscall (SYS_exit, 127);
    }
  /* Init's own cwd may be a layered tree's root (sandstep-jail-child.c): a command starts in /workspace. */
  if (chdir ("/workspace") < 0)
    {
      child->error = errno;
      syscall (SYS_exit, 127);
    }
  /* "--try WORD... --": the words as a shell would run them; else (and when they cannot be) the shell. */
  if (command->direct != NULL)
    exec_searching (command->direct, command->envp);
  execve (command->argv[0], command->argv, command->envp);
  child->error = errno;
  syscall (SYS_exit, 127);
  return 127;
}

/* Starts @command with default signal handling and nothing blocked, as a
 * vfork: no page table is copied, and it returns once the exec is done.
 * Not posix_spawn: glibc's leaves libc's own signals ignored in the child,
 * and searches init's PATH, not the command's.  The command stays in init's
 * session, which has no controlling terminal: it may make a session of its
 * own (setsid), as any program started from a daemon can. */
static int
spawn (Command *command, pid_t *out_pid)
{
  static char stack[64 * 1024] __attribute__ ((aligned (16)));
  Child child = { .command = command };
  pid_t pid = clone (child_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &child);

  if (pid < 0)
    return errno;
  if (child.error != 0)
    {
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      return child.error;
    }
  *out_pid = pid;
  return 0;
}

/* The commands that run: their ids, main processes, and groups (0: init's own, the first command's). */
typedef struct {
  int32_t id;
  pid_t pid;
  pid_t group;
} Running;

static Running running[SANDSTEP_INIT_MAX_COMMANDS];
static int n_running;

/* Kills @r's process group: its own, or for the first command init's (kill(0), which as pid 1 init ignores) and
 * the one it made itself if it made a session of its own (named by its pid, which stays taken while the group
 * lives). */
static void
kill_group (const Running *r)
{
  if (r->group > 0)
    kill (-r->group, SIGKILL);
  else if (getpid () == 1)
    {
      kill (0, SIGKILL);
      kill (-r->pid, SIGKILL);
    }
}

static Running *
find_running (int32_t id)
{
  for (int i = 0; i < n_running; i++)
    if (running[i].id == id)
      return &running[i];
  return NULL;
}

/* @r's main process ended with @status (reaped): it goes, and the caller hears. */
static void
command_ended (int control, Running *r, int status)
{
  int32_t id = r->id;

  if (n_running == 1)
    {
      /* The last command: so does everything any command started. */
      end_everything (0, &status);
      n_running = 0;
      say (control, SANDSTEP_INIT_EXITED, exit_status (status), 0, id);
      remove_ipc ();
      remove_shm ();
      return;
    }
  /* Beside others: what it started in its group goes with it. */
  kill_group (r);
  *r = running[--n_running];
  say (control, SANDSTEP_INIT_EXITED, exit_status (status), 0, id);
}

int
main (int argc, char **argv)
{
  int control, egress = -1, listener = -1, signals;
  sigset_t chld;

  if (argc < 2)
    return 125;
  control = atoi (argv[1]);
  if (argc > 2)
    egress = atoi (argv[2]);
  /* A command must not read or write init's memory or fds through /proc/1. */
  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  umask (022);
  reset_dispositions ();
  sigemptyset (&chld);
  sigaddset (&chld, SIGCHLD);
  if (fcntl (control, F_SETFD, FD_CLOEXEC) < 0 || (egress >= 0 && fcntl (egress, F_SETFD, FD_CLOEXEC) < 0) ||
      sigprocmask (SIG_BLOCK, &chld, NULL) < 0 || (signals = signalfd (-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
    return 125;
  /* Bound before any command starts, so nothing inside can take the port first. */
  if (egress >= 0 && (listener = listen_loopback (SANDSTEP_PROXY_PORT)) < 0)
    return 125;

  for (;;)
    {
      struct pollfd fds[3] = {
        { .fd = control, .events = POLLIN },
        { .fd = signals, .events = POLLIN },
        { .fd = listener, .events = POLLIN },
      };

      if (poll (fds, 3, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return 125;
        }

      if (fds[1].revents & POLLIN)
        {
          struct signalfd_siginfo info;
          int status;
          pid_t pid;
          while (read (signals, &info, sizeof info) > 0)
            ;
          while (n_running > 0 && (pid = waitpid (-1, &status, WNOHANG)) > 0)
            for (int i = 0; i < n_running; i++)
              if (running[i].pid == pid)
                {
                  command_ended (control, &running[i], status);
                  break;
                }
          /* With no command left, orphans that outlived theirs are reaped as they go. */
          while (n_running == 0 && waitpid (-1, &status, WNOHANG) > 0)
            ;
        }

      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
        {
          SandstepInitMessage header = { 0 };
          Command next = { .fds = { -1, -1, -1 } };
          int r = receive (control, &header, &next);
          Running *target;

          if (r == 0)
            break;
          if (r > 0 && header.kind == SANDSTEP_INIT_KILL && (target = find_running (header.id)) != NULL)
            {
              int status = 0;
              if (n_running == 1)
                {
                  if (!end_everything (target->pid, &status))
                    status = SIGKILL;
                  n_running = 0;
                  say (control, SANDSTEP_INIT_EXITED, exit_status (status), 0, header.id);
                  remove_ipc ();
                  remove_shm ();
                }
              else
                {
                  /* Beside others: its group and its main process, whose end the SIGCHLD loop reports (never
                   * waited for here, which a process stuck in the kernel would make init do). */
                  kill_group (target);
                  kill (target->pid, SIGKILL);
                }
            }
          else if (r > 0 && header.kind == SANDSTEP_INIT_RUN && find_running (header.id) == NULL &&
                   n_running < SANDSTEP_INIT_MAX_COMMANDS &&
                   (n_running == 0 || (header.flags & SANDSTEP_INIT_BESIDE)))
            {
              pid_t pid = 0;
              int failed;
              next.own_group = n_running > 0;
              failed = spawn (&next, &pid);
              if (failed != 0)
                say (control, SANDSTEP_INIT_EXITED, 127, failed, header.id);
              else
                running[n_running++] = (Running) { header.id, pid, next.own_group ? pid : 0 };
            }
          else if (r < 0 || header.kind == SANDSTEP_INIT_RUN)
            say (control, SANDSTEP_INIT_EXITED, 125, r < 0 ? EPROTO : EBUSY, header.id);
          /* Hold nothing the command's readers wait on. */
          command_clear (&next);
        }

      if (listener >= 0 && (fds[2].revents & POLLIN))
        {
          int client = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
          if (client >= 0)
            {
              union { char buf[CMSG_SPACE (sizeof (int))]; struct cmsghdr align; } cmsg_buf;
              char byte = 0;
              struct iovec iov = { &byte, 1 };
              struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg_buf.buf,
                                    .msg_controllen = sizeof cmsg_buf.buf };
              struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
              cmsg->cmsg_level = SOL_SOCKET;
              cmsg->cmsg_type = SCM_RIGHTS;
              cmsg->cmsg_len = CMSG_LEN (sizeof (int));
              memcpy (CMSG_DATA (cmsg), &client, sizeof client);
              /* A proxy that does not keep up loses the connection, never stops init. */
              sendmsg (egress, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
              close (client);
            }
        }
    }

  {
    int status;
    end_everything (0, &status);
  }
  return 0;
}
