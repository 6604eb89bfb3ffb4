"""A LangChain agent with one tool, and LangChain's structured output, against `dsinfer serve`.

Run through run_sdk_tests.py (ctest -R sdk_test). The agent is LangChain's own (create_agent, a
LangGraph loop), on ChatOpenAI pointed at our server, with tool_choice "auto" throughout: the bundled
model was taught a calculator tool (tools/tool_training_data.py), so it calls it, reads the result
and answers.
"""

import ast
import operator
import unittest

import pydantic
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from sdk_server import API_KEY, BASE_URL, EXPRESSION_PATTERN, MODEL, TOOL_CALL_MAX_TOKENS

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.USub: operator.neg}


def evaluate(expression):
    """+ - * / on numbers, nothing else (no eval of model output)."""
    def walk(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        raise ValueError("not arithmetic")
    return walk(ast.parse(expression, mode="eval").body)


class CalculatorInput(pydantic.BaseModel):
    # Bounded by a pattern (sdk_server.py says why not maxLength), so that a forced call is short.
    expression: str = pydantic.Field(pattern=EXPRESSION_PATTERN, description="an arithmetic expression such as 12 * 34")


class Calculator:
    """The agent's one tool; it remembers what it was asked."""

    def __init__(self):
        self.calls = []

        @tool(args_schema=CalculatorInput)
        def calculator(expression: str) -> str:
            """Evaluates an arithmetic expression such as 12 * 34 and returns the number."""
            self.calls.append(expression)
            try:
                return str(evaluate(expression))
            except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
                return f"error: {expression!r} is not an arithmetic expression"

        self.tool = calculator


def chat_model(max_tokens=TOOL_CALL_MAX_TOKENS, temperature=1.0):
    return ChatOpenAI(model=MODEL, base_url=BASE_URL + "/v1", api_key=API_KEY, max_retries=0, timeout=60,
                      max_tokens=max_tokens, temperature=temperature, seed=0)


class Sum(pydantic.BaseModel):
    """Two whole numbers to add."""
    a: int = pydantic.Field(ge=0, le=999)
    b: int = pydantic.Field(ge=0, le=999)


class LangChainTest(unittest.TestCase):
    def test_the_calculator_evaluates_arithmetic_only(self):
        self.assertEqual(evaluate("12 * 34"), 408)
        self.assertEqual(evaluate("-(1 + 2) / 4"), -0.75)
        with self.assertRaises(ValueError):
            evaluate("__import__('os')")

    def test_an_agent_calls_its_tool_and_then_answers(self):
        calculator = Calculator()
        agent = create_agent(chat_model(max_tokens=200, temperature=0.0), [calculator.tool],
                             system_prompt="Use the calculator for arithmetic.")
        result = agent.invoke({"messages": [HumanMessage("What is 12 * 34?")]}, {"recursion_limit": 8})
        messages = result["messages"]
        kinds = [type(message).__name__ for message in messages]
        self.assertEqual(kinds[:2], ["HumanMessage", "AIMessage"], kinds)

        calls = messages[1].tool_calls
        self.assertGreaterEqual(len(calls), 1, "the model did not call its tool")
        self.assertEqual(kinds[2:2 + len(calls)], ["ToolMessage"] * len(calls), kinds)
        for call, answer in zip(calls, messages[2:]):
            self.assertEqual(call["name"], "calculator")
            self.assertRegex(call["args"]["expression"], EXPRESSION_PATTERN)
            self.assertEqual(answer.tool_call_id, call["id"])
        self.assertEqual(calculator.calls[:len(calls)], [call["args"]["expression"] for call in calls],
                         "the agent ran the tool with the model's calls")

        final = messages[-1]
        self.assertGreater(len(messages), 2 + len(calls), "no model turn after the tool's results")
        self.assertIsInstance(final, AIMessage)
        self.assertEqual(final.tool_calls, [], "the agent's last message must be an answer, not another call")
        result_text = str(evaluate(calculator.calls[-1]))
        self.assertIn(result_text, final.content, "the answer does not use the tool's result")

    def test_with_structured_output_by_function_calling_returns_the_object(self):
        structured = chat_model().with_structured_output(Sum, method="function_calling")
        result = structured.invoke("Add 12 and 34.")
        self.assertIsInstance(result, Sum)
        self.assertTrue(0 <= result.a <= 999 and 0 <= result.b <= 999)

    def test_with_structured_output_by_json_schema_returns_the_object(self):
        structured = chat_model().with_structured_output(Sum, method="json_schema")
        self.assertIsInstance(structured.invoke("Add 12 and 34."), Sum)


if __name__ == "__main__":
    unittest.main()
