# claim.mk: two targets share one sandbox under -j2.  Each writes its name to
# scratch.txt, sleeps, and reads it back: a step holds its sandbox from its
# first sandbox line to its last, so neither reads the other's name.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: box.sbx

all: x.out y.out

box.sbx:
	$(sandbox-provision lifetime=10m) > $@

x.out y.out: box.sbx
	$(sandbox-run @box.sbx,echo $@ > scratch.txt)
	sleep 1
	$(sandbox-run @box.sbx,cat scratch.txt) > $@

# Fails half-way: its first sandbox line ran, its last never will.
half.out: box.sbx
	$(sandbox-run @box.sbx,echo half > scratch.txt)
	false
	$(sandbox-run @box.sbx,cat scratch.txt) > $@

# Another target: goes in at once, half.out's recipe having failed (its hold ended).
other.out: box.sbx
	$(sandbox-run @box.sbx wait=0,cat scratch.txt) > $@

release: box.sbx
	$(sandbox-release @box.sbx)
