import { familyBudget } from '../budget.js';

familyBudget('threshold');
