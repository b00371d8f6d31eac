# kfail.mk: a `make -k -j4` fan-out over one shared sandbox where one step
# fails half-way (a host line between its sandbox lines).  Its hold ends when
# its recipe fails, so the other steps go in at once instead of waiting for
# their wait= budget (WAIT) and failing with 75.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: box.sbx
WAIT ?= 600
OUTS := a.out b.out c.out

all: fail.out $(OUTS)

box.sbx:
	$(sandbox-provision lifetime=10m) > $@

# Takes the sandbox first (the others start after), holds it a second, then fails.
fail.out: box.sbx
	$(sandbox-run @box.sbx,echo fail > scratch.txt) && touch fail.started
	sleep 1; false
	$(sandbox-run @box.sbx,cat scratch.txt) > $@

$(OUTS): box.sbx | started
	$(sandbox-run @box.sbx wait=$(WAIT),echo $@ > scratch.txt)
	$(sandbox-run @box.sbx wait=$(WAIT),cat scratch.txt) > $@

# The others start once fail.out's recipe holds the sandbox (30 s at most).
started: box.sbx
	for i in $$(seq 300); do test -e fail.started && break; sleep 0.1; done

release: box.sbx
	$(sandbox-release @box.sbx)
