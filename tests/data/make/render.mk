# render.mk: what each call renders (run with -n, or the recipes just echo).
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

show-run: ; $(sandbox-run @box.sbx timeout=5,echo a,b,c)
show-quote: ; $(sandbox-run @box.sbx wait=0,echo 'it'"'"'s' "$$HOME")
show-put: ; $(sandbox-put @box.sbx,src/   /workspace/src/)
show-gc: ; $(sandbox-gc run=X expired)
show-provision: ; $(sandbox-provision network=open env=A env=B=c lifetime=1h)
show-describe: ; $(sandbox-describe sandstep-0123456789abcdef)
show-export: ; $(sandbox-export @box.sbx max-bytes=5M,report.md=file:///tmp/out/report.md)
show-export-s3: ; $(sandbox-export @box.sbx no-clobber read-timeout=30,report.md=s3://bucket/reports/report.md big.bin=s3://bucket/big.bin)
show-agent-options: ; $(sandbox-agent @box.sbx command-timeout=30 max-command-timeout=120 max-output-lines=100 max-output-bytes=10K max-read-bytes=1M prefix=box export=report.md=file:///tmp/out/report.md,Fix it)
show-call-options: ; $(sandbox-call @box.sbx prefix=box command-timeout=5,box_run_command {"command": "ls"})
show-release: ; $(sandbox-release @box.sbx keep=0,)
show-id: ; @echo run=$(sandbox-run-id ) holder=$(sandbox-holder )
sub/dir/show-holder: ; @echo holder=$(sandbox-holder )

# Four sandbox lines over two sandboxes: @a.sbx and @./a.sbx are one.
show-steps:
	@$(sandbox-run @a.sbx,one)
	@$(sandbox-run @./a.sbx,two)
	@$(sandbox-put @b.sbx,b.txt /workspace/)
	@$(sandbox-run @a.sbx,three)
	@echo "ends=$$SANDSTEP_STEP_ENDS"

# At parse time there is no recipe; a target make cannot name back is left alone.
PARSED := $(sandbox-run @a.sbx,parsed)
show-parse-time: ; @echo "$(PARSED)"
weird\=name: ; @$(sandbox-run @a.sbx,weird)
