# race.mk: the same target of the same run in two makes at once (issue 30,
# 26).  Run in two directories with one SANDSTEP_RUN and SANDSTEP_DAG, so
# both are the holder DAG/RUN/out.txt, on one sandbox HANDLE.  Each writes
# its name ME into the sandbox, says so (ME.in), waits up to 5 s for its PEER
# to say so too, and reads the name back: a hold belongs to one make and
# target, so the other make waits and neither reads the other's name.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

out.txt:
	$(sandbox-run $(HANDLE),echo $(ME) > mark.txt)
	touch ../$(ME).in; for i in $$(seq 50); do test -e ../$(PEER).in && break; sleep 0.1; done
	$(sandbox-run $(HANDLE),cat mark.txt) > $@
