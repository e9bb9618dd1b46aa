# The pinned emulator, one place for infra/test.sh and infra/emulator.sh.
# shellcheck shell=bash disable=SC2034
MOTO_VERSION='5.2.5'
MOTO_REQ="moto[server,sqs,dynamodb,events,scheduler,ses,sns,secretsmanager]==$MOTO_VERSION"
