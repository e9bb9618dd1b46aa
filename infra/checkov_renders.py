#!/usr/bin/env python3
"""checkov on template.yaml as written and rendered (infra/render_template.py) for every
combination of the three providers and the branches those leave out; one line per template.
Usage (from the project root): python infra/checkov_renders.py PATH_TO_CHECKOV"""
import itertools, json, os, subprocess, sys, tempfile
sys.dont_write_bytecode = True  # no infra/__pycache__ left in the checkout
sys.path.insert(0, "infra")
import render_template as rt

template = rt.yaml.load(open("template.yaml").read(), Loader=rt.CfnLoader)
arn = "arn:aws:{}:us-east-1:123456789012:{}".format
secret = lambda name: arn("secretsmanager", f"secret:{name}-token-AbCdEf")
http = lambda c: {f"{c}HttpEndpoint": f"https://{c.lower()}.example/v1/send",
                  f"{c}HttpTokenSecretArn": secret(c.lower())}
# The parameters each provider's grants depend on. A provider the template allows that is not
# listed here fails the step: add what its grants need.
WITH = {
    ("Push", "none"): {}, ("Email", "none"): {}, ("Sms", "none"): {},
    ("Push", "http"): http("Push"), ("Email", "http"): http("Email"), ("Sms", "http"): http("Sms"),
    ("Push", "sns"): {"PushSnsPlatformApplicationArn": arn("sns", "app/GCM/reminders"),
                      "PushSnsPlatformApplicationArns": arn("sns", "app/APNS/reminders")},
    ("Email", "ses"): {"EmailSesFrom": "noreply@example.com",
                       "EmailSesConfigurationSet": "reminders-events"},
    ("Sms", "sns"): {},
}
renders = {}
channels = ["Push", "Email", "Sms"]
allowed = [template["Parameters"][f"{c}Provider"]["AllowedValues"] for c in channels]
for combo in itertools.product(*allowed):
    overrides = {}
    for c, provider in zip(channels, combo):
        if (c, provider) not in WITH:
            sys.exit(f"no parameters known for {c}Provider={provider}: add them to WITH")
        overrides[f"{c}Provider"] = provider
        overrides.update(WITH[(c, provider)])
    renders[" ".join(f"{c.lower()}={p}" for c, p in zip(channels, combo))] = overrides
# The branches the combinations leave out.
renders.update({
    "push=sns sms=sns, no platform application": {"PushProvider": "sns", "SmsProvider": "sns"},
    "push=sns, tokens' application only": {
        "PushProvider": "sns", "PushSnsPlatformApplicationArn": arn("sns", "app/GCM/reminders")},
    "email=ses, no configuration set": {
        "EmailProvider": "ses", "EmailSesFrom": "noreply@example.com"},
    "no reserved concurrency": {
        "SchedulerReservedConcurrency": "0", "RedriveReservedConcurrency": "0"},
    "own alarm topic and table key": {
        "AlarmTopicArn": arn("sns", "oncall"), "TableKmsKeyArn": arn("kms", "key/0b1e2c3d")},
    "alarm email, 16 schedules": {"AlarmEmail": "oncall@example.org", "SchedulerParallelism": "16"},
    "tracing active": {"Tracing": "Active"},
    "consumer mappings in provisioned mode": {"ConsumerMinPollers": "20"},
    # The defaults give IAM on the HTTP API and a bus of the stack's own.
    "JWT authorizer, existing event bus": {
        "JwtIssuer": "https://auth.example.com/", "JwtAudience": "reminders-api,reminders-cli",
        "EventBusName": "orders"},
})
with tempfile.TemporaryDirectory() as d:
    files = {"template.yaml as written": os.path.abspath("template.yaml")}
    for i, (label, overrides) in enumerate(renders.items()):
        files[label] = os.path.join(d, f"render-{i:02}.json")
        with open(files[label], "w") as f:
            json.dump(rt.Renderer(template, overrides).render(), f)
    run = subprocess.run(
        [sys.argv[1], "--framework", "cloudformation", "--skip-download", "-o", "json",
         "-f", *files.values()], capture_output=True, text=True)
try:
    report = json.loads(run.stdout)
except ValueError:
    report = None
if run.returncode not in (0, 1) or not isinstance(report, dict):
    sys.exit(f"checkov did not report (exit {run.returncode}):\n{run.stderr[-3000:]}")
if report["summary"].get("parsing_errors"):
    sys.exit(f"checkov could not parse {report['summary']['parsing_errors']} template(s)")
counts = {os.path.basename(p): {"passed": [], "failed": [], "skipped": []} for p in files.values()}
for kind in counts[os.path.basename(files["template.yaml as written"])]:
    for r in report["results"].get(f"{kind}_checks", []):
        counts[os.path.basename(r["file_abs_path"])][kind].append(r)
bad = 0
for label, path in files.items():
    c = counts[os.path.basename(path)]
    n = {k: len(v) for k, v in c.items()}
    print(f"{label:<45} {n['passed']:>3} passed, {n['failed']} failed, {n['skipped']:>2} skipped")
    if not any(n.values()):
        print("    no result: checkov did not scan it")
        bad += 1
    for r in c["failed"]:
        print(f"    FAILED {r['check_id']} {r['resource']}: {r['check_name']}")
        bad += 1
sys.exit(1 if bad else 0)
