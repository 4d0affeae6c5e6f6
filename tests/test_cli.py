"""The command line's front door (epiformer.cli)."""

import subprocess
import sys

from epiformer.cli import main


def test_a_bare_epiformer_lists_every_command_with_what_it_does(capsys):
    assert main([]) == 0
    printed = capsys.readouterr().out
    for command in ("init", "predict", "variants", "tracks", "summary", "crispr-export"):
        assert command in printed
    assert "score enhancer-promoter pairs with a trained model" in printed and "arguments are required" not in printed


def test_the_installed_command_without_arguments_prints_help_not_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "epiformer.cli"], capture_output=True, text=True)
    assert done.returncode == 0 and "commands:" in done.stdout and not done.stderr
