# newline.mk: a newline in a rendered word would split the recipe line in two,
# the second half running on the host.  Each target tries; each must stop
# make at its line, and no PWNED-* file may appear, even under make -i.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

define newline


endef

command: ; -$(sandbox-run @box.sbx,echo inside$(newline)touch $(CURDIR)/PWNED-command #)
file-text: ; $(sandbox-run @box.sbx,$(file <script.txt))
agent-prompt: ; $(sandbox-agent @box.sbx,do it$(newline)touch $(CURDIR)/PWNED-agent #)
helper: ; $(sandbox-release @box.sbx)
one-line: ; $(sandbox-run @box.sbx,echo inside; echo still inside)
