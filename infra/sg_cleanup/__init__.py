"""The EMR security-group cleanup, one component: its construct
(:mod:`infra.sg_cleanup.construct`) beside its function's code
(:mod:`infra.sg_cleanup.handler`), as the AWS CDK project-structure sample
(aws-samples/aws-cdk-project-structure-python) keeps a component's
``infrastructure.py`` beside its ``runtime/``.

The handler stays a module of its own, not a ``runtime/`` folder: the
construct inlines its text as the function's code (CloudFormation ``ZipFile``,
module ``index``), so where the file lives does not reach the template, and
its text must not change for the template to stay the same.
"""
