"""The identity part of template.yaml: an optional Cognito user pool (CreateUserPool) whose tokens carry the tenant
where users cannot change it, and the API's JWT authorizer and claims pointing at it when it is created, at
JwtIssuer / JwtAudience / TenantClaim / OperatorClaim otherwise.

How each test breaks: make the pool unconditional and the first fails; drop WriteAttributes from the app client
(Cognito then lets it write every attribute, custom:tenant included) or add custom:tenant to it and the second
fails; point the authorizer at JwtIssuer always and the third fails (a created pool's tokens would all be
refused); set ONWARD_OPERATOR_CLAIM from a constant, or forget it, and the fourth fails.
"""

from __future__ import annotations

from typing import Any

from onward_infra.template import load_template
from tests.samtemplate import translate

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
COGNITO_TYPES = {"AWS::Cognito::UserPool", "AWS::Cognito::UserPoolClient", "AWS::Cognito::UserPoolGroup",
                 "AWS::Cognito::UserPoolResourceServer", "AWS::Cognito::UserPoolDomain"}


def api_environment() -> dict[str, Any]:
    variables: dict[str, Any] = RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]
    return variables


def if_pool(value: Any) -> tuple[Any, Any]:
    """(value with the pool, value without) of `!If [CreatesUserPool, a, b]`."""
    assert isinstance(value, dict) and list(value) == ["Fn::If"], value
    condition, created, external = value["Fn::If"]
    assert condition == "CreatesUserPool"
    return created, external


def test_the_user_pool_exists_only_when_asked_for() -> None:
    assert TEMPLATE["Parameters"]["CreateUserPool"]["Default"] == "false"
    assert TEMPLATE["Conditions"]["CreatesUserPool"] == {"Fn::Equals": [{"Ref": "CreateUserPool"}, "true"]}
    cognito = {name: r for name, r in RESOURCES.items() if r["Type"] in COGNITO_TYPES}
    assert {r["Type"] for r in cognito.values()} == COGNITO_TYPES
    for name, resource in cognito.items():
        assert resource.get("Condition") in {"CreatesUserPool", "CreatesUserPoolDomain"}, name
    assert TEMPLATE["Conditions"]["CreatesUserPoolDomain"]["Fn::And"][0] == {"Condition": "CreatesUserPool"}
    for output in ("UserPoolId", "UserPoolClientId", "OperatorClientId"):
        assert TEMPLATE["Outputs"][output]["Condition"] == "CreatesUserPool"
    # without the pool, an issuer must be given (a rule, checked before anything is created)
    rule = TEMPLATE["Rules"]["AnIssuerOrAUserPool"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "CreateUserPool"}, "false"]}
    assert [assertion["Assert"] for assertion in rule["Assertions"]] == [
        {"Fn::Not": [{"Fn::Equals": [{"Ref": "JwtIssuer"}, ""]}]},
        {"Fn::Not": [{"Fn::Contains": [{"Ref": "JwtAudience"}, ""]}]}]


def test_users_cannot_write_their_tenant() -> None:
    """custom:tenant is in the pool's schema, readable by the app client but not writable: without
    WriteAttributes a Cognito app client may write every mutable attribute. Nobody signs up on their own."""
    pool = RESOURCES["UserPool"]["Properties"]
    assert {"Name": "tenant", "AttributeDataType": "String", "Mutable": True,
            "StringAttributeConstraints": {"MinLength": "1", "MaxLength": "64"}} in pool["Schema"]
    assert pool["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
    clients = [r["Properties"] for r in RESOURCES.values() if r["Type"] == "AWS::Cognito::UserPoolClient"]
    assert len(clients) == 2
    for client in clients:
        assert "WriteAttributes" in client and "custom:tenant" not in client["WriteAttributes"]
    users = RESOURCES["UserPoolClient"]["Properties"]
    assert "custom:tenant" in users["ReadAttributes"]


def test_the_operator_scope_and_group_exist_in_the_pool() -> None:
    server = RESOURCES["UserPoolResourceServer"]["Properties"]
    assert server["Identifier"] == "onward"
    assert [scope["ScopeName"] for scope in server["Scopes"]] == ["onward-operator"]
    assert RESOURCES["OperatorsGroup"]["Properties"]["GroupName"] == "onward-operator"
    operators = RESOURCES["OperatorClient"]["Properties"]
    assert operators["AllowedOAuthFlows"] == ["client_credentials"]
    assert operators["AllowedOAuthScopes"] == [f"{server['Identifier']}/onward-operator"]
    # the claims the API reads are the pool's when it is created
    assert if_pool(api_environment()["ONWARD_OPERATOR_SCOPE_PREFIX"])[0] == server["Identifier"]
    assert if_pool(api_environment()["ONWARD_TENANT_CLAIM"])[0] == "custom:tenant"
    assert if_pool(api_environment()["ONWARD_OPERATOR_CLAIM"])[0] == "cognito:groups"


def test_the_authorizer_trusts_the_pool_when_created_and_the_parameters_otherwise() -> None:
    jwt = RESOURCES["HttpApi"]["Properties"]["Auth"]["Authorizers"]["Jwt"]["JwtConfiguration"]
    # the pool's issuer, as its tokens' `iss` reads (https://cognito-idp.<region>.amazonaws.com/<pool id>)
    assert if_pool(jwt["issuer"]) == ({"Fn::Sub": "https://cognito-idp.${AWS::Region}.${AWS::URLSuffix}/${UserPool}"},
                                      {"Ref": "JwtIssuer"})
    assert if_pool(jwt["audience"]) == ([{"Ref": "UserPoolClient"}, {"Ref": "OperatorClient"}], {"Ref": "JwtAudience"})
    # and so it stays through the SAM transform (the authorizer lands in the API's OpenAPI body)
    translated = translate()["Resources"]
    body = translated["HttpApi"]["Properties"]["Body"]
    authorizer = body["components"]["securitySchemes"]["Jwt"]["x-amazon-apigateway-authorizer"]
    assert if_pool(authorizer["jwtConfiguration"]["issuer"]) == if_pool(jwt["issuer"])


def test_the_operator_claim_reaches_the_api_functions_environment() -> None:
    environment = api_environment()
    assert if_pool(environment["ONWARD_OPERATOR_CLAIM"])[1] == {"Ref": "OperatorClaim"}
    assert if_pool(environment["ONWARD_OPERATOR_SCOPE_PREFIX"])[1] == {"Ref": "OperatorScopePrefix"}
    assert if_pool(environment["ONWARD_TENANT_CLAIM"])[1] == {"Ref": "TenantClaim"}
    assert TEMPLATE["Parameters"]["OperatorClaim"]["Default"] == "groups"
